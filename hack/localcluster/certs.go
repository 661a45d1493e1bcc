package localcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// certValidity is long enough for a detached cluster to outlive any
// development session; the CA is thrown away with the state folder.
const certValidity = 5 * 365 * 24 * time.Hour

// keyPair is a certificate (or public key) with its private key, PEM encoded.
type keyPair struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
	keyPEM  []byte
}

// pki holds every credential of one cluster.
type pki struct {
	ca        *keyPair
	apiserver *keyPair
	admin     *keyPair
	kcm       *keyPair
	// service-account token signing key (private) and its public half.
	saKeyPEM []byte
	saPubPEM []byte
}

func newKey() (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

// newCert signs tmpl with parent (self-signed when parent is nil).
func newCert(tmpl *x509.Certificate, parent *keyPair) (*keyPair, error) {
	key, keyPEM, err := newKey()
	if err != nil {
		return nil, err
	}
	if tmpl.SerialNumber, err = serial(); err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl.NotBefore = now.Add(-time.Hour) // tolerate small clock skew
	tmpl.NotAfter = now.Add(certValidity)
	tmpl.BasicConstraintsValid = true
	signer, signerCert := key, tmpl
	if parent != nil {
		signer, signerCert = parent.key, parent.cert
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, &key.PublicKey, signer)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &keyPair{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  keyPEM,
	}, nil
}

func clientCert(ca *keyPair, cn string, orgs ...string) (*keyPair, error) {
	return newCert(&x509.Certificate{
		Subject:     pkix.Name{CommonName: cn, Organization: orgs},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca)
}

// newPKI creates the CA, the apiserver serving certificate, the client
// certificates and the service-account signing key.
func newPKI() (*pki, error) {
	var p pki
	var err error
	p.ca, err = newCert(&x509.Certificate{
		Subject:               pkix.Name{CommonName: "kontinue-local-ca"},
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		MaxPathLenZero:        true,
		BasicConstraintsValid: true,
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("CA: %w", err)
	}
	p.apiserver, err = newCert(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{
			"localhost",
			"kubernetes",
			"kubernetes.default",
			"kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local",
		},
		// 10.0.0.1 is the ClusterIP of the "kubernetes" Service in
		// serviceClusterIPRange.
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback, net.ParseIP("10.0.0.1")},
	}, p.ca)
	if err != nil {
		return nil, fmt.Errorf("apiserver serving certificate: %w", err)
	}
	if p.admin, err = clientCert(p.ca, "kontinue-admin", "system:masters"); err != nil {
		return nil, fmt.Errorf("admin client certificate: %w", err)
	}
	// The controller-manager runs every controller with its own identity
	// (--use-service-account-credentials=false), so it needs to act on every
	// kind (the garbage collector deletes anything): make it a master too.
	if p.kcm, err = clientCert(p.ca, "system:kube-controller-manager", "system:masters"); err != nil {
		return nil, fmt.Errorf("controller-manager client certificate: %w", err)
	}
	saKey, saKeyPEM, err := newKey()
	if err != nil {
		return nil, fmt.Errorf("service-account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("service-account key: %w", err)
	}
	p.saKeyPEM = saKeyPEM
	p.saPubPEM = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})
	return &p, nil
}

// certFiles are the paths written by pki.write.
type certFiles struct {
	caCert, caKey         string
	apiserverCert, apiKey string
	adminCert, adminKey   string
	saKey, saPub          string
}

func (p *pki) write(dir string) (certFiles, error) {
	f := certFiles{
		caCert:        filepath.Join(dir, "ca.crt"),
		caKey:         filepath.Join(dir, "ca.key"),
		apiserverCert: filepath.Join(dir, "apiserver.crt"),
		apiKey:        filepath.Join(dir, "apiserver.key"),
		adminCert:     filepath.Join(dir, "admin.crt"),
		adminKey:      filepath.Join(dir, "admin.key"),
		saKey:         filepath.Join(dir, "sa.key"),
		saPub:         filepath.Join(dir, "sa.pub"),
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return f, err
	}
	for path, data := range map[string][]byte{
		f.caCert:        p.ca.certPEM,
		f.caKey:         p.ca.keyPEM,
		f.apiserverCert: p.apiserver.certPEM,
		f.apiKey:        p.apiserver.keyPEM,
		f.adminCert:     p.admin.certPEM,
		f.adminKey:      p.admin.keyPEM,
		f.saKey:         p.saKeyPEM,
		f.saPub:         p.saPubPEM,
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return f, err
		}
	}
	return f, nil
}

// kubeconfig renders a self-contained kubeconfig (credentials embedded).
func kubeconfig(server string, ca, user *keyPair, userName string) []byte {
	b64 := base64.StdEncoding.EncodeToString
	var sb strings.Builder
	fmt.Fprintf(&sb, `apiVersion: v1
kind: Config
clusters:
- name: kontinue-local
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: kontinue-local
  context:
    cluster: kontinue-local
    user: %s
current-context: kontinue-local
`, server, b64(ca.certPEM), userName, b64(user.certPEM), b64(user.keyPEM), userName)
	return []byte(sb.String())
}

// WriteServingCert writes a self-signed serving certificate for localhost
// and 127.0.0.1 as dir/tls.crt and dir/tls.key: enough for a controller
// whose webhook server must start although no webhook configuration points
// at it (Cartographer's, when it runs next to Kontinue for comparisons).
func WriteServingCert(dir string) error {
	kp, err := newCert(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "localhost"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, nil)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), kp.certPEM, 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "tls.key"), kp.keyPEM, 0o600)
}
