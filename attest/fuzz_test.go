package attest

import (
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"testing"

	"kontinue.dev/kontinue/reconciler/history"
	st "kontinue.dev/kontinue/reconciler/status"
)

// FuzzVerify: a stored envelope is anyone's to write (whoever may write
// the ConfigMap): any bytes end as an error or a verified statement, never
// a panic.
func FuzzVerify(f *testing.F) {
	// A fixed key, made from a seed: the corpus stays valid across runs.
	der, err := x509.MarshalPKCS8PrivateKey(ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)))
	if err != nil {
		f.Fatal(err)
	}
	k, err := ParseKey(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	if err != nil {
		f.Fatal(err)
	}
	stmt, err := Build(Input{Owner: wl, Status: workload(), Step: "build"})
	if err != nil {
		f.Fatal(err)
	}
	env, err := Sign(context.Background(), k, stmt)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(env)
	f.Add([]byte(`{"payloadType":"application/vnd.in-toto+json","payload":"e30=","signatures":[{"sig":""}]}`))
	f.Add([]byte(`{"signatures":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Verify(context.Background(), k, b)
		if err == nil {
			if _, err := Marshal(s); err != nil {
				t.Fatalf("verified, but cannot be written back: %v", err)
			}
		}
	})
}

// FuzzBuild: any status (a person may write an owner's status where RBAC
// lets them) ends as a statement or an error.
func FuzzBuild(f *testing.F) {
	b, _ := json.Marshal(workload())
	f.Add(b, "build")
	f.Add([]byte(`{"resources":[{"name":"x","outputs":[{"name":"image","preview":"a@sha256:","digest":"sha256:zz"}],"provenance":{"current":{"digest":"","outcome":"Succeeded","sources":[{"name":"","resource":"","revision":"@sha1:"}]}}}]}`), "x")
	f.Fuzz(func(t *testing.T, status []byte, step string) {
		var s st.OwnerStatus
		if json.Unmarshal(status, &s) != nil {
			return
		}
		if stmt, err := Build(Input{Owner: wl, Status: s, Step: step}); err == nil {
			if _, err := Marshal(stmt); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// FuzzSignerMerge: what a step's key holds is anyone's to write: whatever
// is stored, the merge keeps the fresh statement last, within the bounds,
// and nothing its key does not verify.
func FuzzSignerMerge(f *testing.F) {
	der, err := x509.MarshalPKCS8PrivateKey(ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)))
	if err != nil {
		f.Fatal(err)
	}
	k, err := ParseKey(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	if err != nil {
		f.Fatal(err)
	}
	stmt, err := Build(Input{Owner: wl, Status: workload(), Step: "build"})
	if err != nil {
		f.Fatal(err)
	}
	env, err := Sign(context.Background(), k, stmt)
	if err != nil {
		f.Fatal(err)
	}
	s := NewSigner(k, "fuzz")
	o := history.Owner{APIVersion: wl.APIVersion, Kind: wl.Kind, Namespace: wl.Namespace, Name: wl.Name, UID: wl.UID}
	f.Add(string(env))
	f.Add(string(env) + "\n" + string(env) + "\n\n{")
	f.Add("")
	f.Fuzz(func(t *testing.T, stored string) {
		got := Envelopes(s.Merge(o, DataKey("build"), stored, string(env)))
		if len(got) == 0 || got[len(got)-1] != string(env) || len(got) > KeepStatements {
			t.Fatalf("kept %d envelopes, the fresh one last: %v", len(got), len(got) > 0 && got[len(got)-1] == string(env))
		}
		for _, e := range got {
			if _, err := Verify(context.Background(), k, []byte(e)); err != nil {
				t.Fatalf("kept an envelope that does not verify: %v", err)
			}
		}
	})
}
