package tracking

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/klauspost/compress/s2"

	"kontinue.dev/kontinue/jsonvalue"
)

// Packed objects keep their JSON compressed (s2, block format, with a
// dictionary): a Workload with a three-step status is ~4.7 KiB of JSON and
// ~0.9 KiB compressed, a stamped ConfigMap ~0.9 and ~0.3 KiB. s2 is the
// fastest codec of klauspost/compress (already a dependency): unpacking a
// Workload costs ~1% of decoding its JSON, which every read does anyway,
// and packing ~5% of marshalling it. zstd compressed a third better but
// costs 2–5× s2's time and keeps large encoder state.
//
// Most of what a cached object holds is vocabulary every object repeats
// (keys, condition types and reasons, Kontinue's labels): compressing each
// object alone cannot find it, a dictionary of it can. The dictionary is
// part of the binary, never learnt from the cluster: what a process packed
// it can always unpack.

// dictSamples are objects as Kontinue caches them: an owner with the
// status Kontinue writes and objects stamped for it. Their values are
// made up; what matters is what repeats. Canonicalized at start as pack
// marshals (sorted keys, no spaces), the most common last (nearer
// matches encode shorter).
var dictSamples = []string{
	`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"annotations":{"deployment.kubernetes.io/revision":"1"},"generation":1,"labels":{"app.kubernetes.io/component":"run","app.kubernetes.io/name":"app"}},
	 "spec":{"progressDeadlineSeconds":600,"replicas":1,"revisionHistoryLimit":10,"selector":{"matchLabels":{"app.kubernetes.io/name":"app"}},
	  "strategy":{"rollingUpdate":{"maxSurge":"25%","maxUnavailable":"25%"},"type":"RollingUpdate"},
	  "template":{"metadata":{"labels":{"app.kubernetes.io/name":"app"}},"spec":{"containers":[{"image":"ghcr.io/team/app@sha256:0","imagePullPolicy":"IfNotPresent","name":"workload",
	   "ports":[{"containerPort":8080,"protocol":"TCP"}],"resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File"}],
	   "dnsPolicy":"ClusterFirst","restartPolicy":"Always","schedulerName":"default-scheduler","securityContext":{},"serviceAccountName":"default","terminationGracePeriodSeconds":30}}},
	 "status":{"availableReplicas":1,"conditions":[{"lastTransitionTime":"2025-01-01T00:00:00Z","lastUpdateTime":"2025-01-01T00:00:00Z","message":"Deployment has minimum availability.","reason":"MinimumReplicasAvailable","status":"True","type":"Available"},
	  {"lastTransitionTime":"2025-01-01T00:00:00Z","lastUpdateTime":"2025-01-01T00:00:00Z","message":"ReplicaSet \"app\" has successfully progressed.","reason":"NewReplicaSetAvailable","status":"True","type":"Progressing"}],
	  "observedGeneration":1,"readyReplicas":1,"replicas":1,"updatedReplicas":1}}`,
	`{"apiVersion":"carto.run/v1alpha1","kind":"Deliverable","metadata":{"generation":1,"labels":{"app.kubernetes.io/part-of":"app","carto.run/workload-name":"app","carto.run/workload-namespace":"default"},"name":"app","namespace":"default"},
	 "spec":{"source":{"image":"ghcr.io/team/app-bundle:main"}},
	 "status":{"conditions":[{"lastTransitionTime":"2025-01-01T00:00:00Z","message":"","observedGeneration":1,"reason":"Ready","status":"True","type":"DeliveryReady"},
	  {"lastTransitionTime":"2025-01-01T00:00:00Z","message":"","observedGeneration":1,"reason":"ResourceSubmissionComplete","status":"True","type":"ResourcesSubmitted"},
	  {"lastTransitionTime":"2025-01-01T00:00:00Z","message":"","observedGeneration":1,"reason":"HealthyConditionRule","status":"True","type":"ResourcesHealthy"},
	  {"lastTransitionTime":"2025-01-01T00:00:00Z","message":"","observedGeneration":1,"reason":"Ready","status":"True","type":"Ready"}],
	  "deliveryRef":{"kind":"ClusterDelivery","name":"delivery"},"observedGeneration":1}}`,
	`{"apiVersion":"carto.run/v1alpha1","kind":"Workload","metadata":{"generation":1,"labels":{"app.kubernetes.io/part-of":"app","apps.tanzu.vmware.com/workload-type":"web"},"name":"app","namespace":"default"},
	 "spec":{"params":[{"name":"port","value":"8080"}],"serviceAccountName":"default","source":{"git":{"ref":{"branch":"main"},"url":"https://github.com/team/app.git"}}},
	 "status":{"conditions":[{"lastTransitionTime":"2025-01-01T00:00:00Z","message":"","observedGeneration":1,"reason":"Ready","status":"True","type":"SupplyChainReady"},
	  {"lastTransitionTime":"2025-01-01T00:00:00Z","message":"","observedGeneration":1,"reason":"ResourceSubmissionComplete","status":"True","type":"ResourcesSubmitted"},
	  {"lastTransitionTime":"2025-01-01T00:00:00Z","message":"","observedGeneration":1,"reason":"HealthyConditionRule","status":"True","type":"ResourcesHealthy"},
	  {"lastTransitionTime":"2025-01-01T00:00:00Z","message":"","observedGeneration":1,"reason":"Ready","status":"True","type":"Ready"}],
	  "observedGeneration":1,"resources":[
	  {"conditions":[{"lastTransitionTime":"2025-01-01T00:00:00Z","message":"","observedGeneration":1,"reason":"ResourceSubmissionComplete","status":"True","type":"ResourceSubmitted"},
	   {"lastTransitionTime":"2025-01-01T00:00:00Z","message":"all outputs are available","observedGeneration":1,"reason":"OutputsAvailable","status":"True","type":"Healthy"},
	   {"lastTransitionTime":"2025-01-01T00:00:00Z","message":"","observedGeneration":1,"reason":"Ready","status":"True","type":"Ready"}],
	   "name":"source-provider","outputs":[{"digest":"sha256:0","lastTransitionTime":"2025-01-01T00:00:00Z","name":"url","preview":"https://github.com/team/app.git\n"},
	   {"digest":"sha256:0","lastTransitionTime":"2025-01-01T00:00:00Z","name":"revision","preview":"main\n"}],
	   "provenance":{"current":{"digest":"0","endedAt":"2025-01-01T00:00:00Z","outcome":"Succeeded","ownerGeneration":1,"takenAt":"2025-01-01T00:00:00Z"}},
	   "stampedRef":{"apiVersion":"source.toolkit.fluxcd.io/v1","kind":"GitRepository","name":"app","namespace":"default","resource":"gitrepositories"},
	   "templateRef":{"apiVersion":"carto.run/v1alpha1","kind":"ClusterSourceTemplate","name":"source"}},
	  {"conditions":[{"lastTransitionTime":"2025-01-01T00:00:00Z","message":"","observedGeneration":1,"reason":"ResourceSubmissionComplete","status":"True","type":"ResourceSubmitted"},
	   {"lastTransitionTime":"2025-01-01T00:00:00Z","message":"all outputs are available","observedGeneration":1,"reason":"OutputsAvailable","status":"True","type":"Healthy"},
	   {"lastTransitionTime":"2025-01-01T00:00:00Z","message":"","observedGeneration":1,"reason":"Ready","status":"True","type":"Ready"}],
	   "inputs":[{"name":"source-provider"}],"name":"image-builder","outputs":[{"digest":"sha256:0","lastTransitionTime":"2025-01-01T00:00:00Z","name":"image","preview":"ghcr.io/team/app:main\n"}],
	   "provenance":{"current":{"digest":"0","endedAt":"2025-01-01T00:00:00Z","outcome":"Succeeded","ownerGeneration":1,
	    "sources":[{"name":"source","resource":"source-provider","revision":"main","url":"https://github.com/team/app.git"}],"takenAt":"2025-01-01T00:00:00Z"}},
	   "stampedRef":{"apiVersion":"kpack.io/v1alpha2","kind":"Image","name":"app","namespace":"default","resource":"images"},
	   "templateRef":{"apiVersion":"carto.run/v1alpha1","kind":"ClusterImageTemplate","name":"image"}},
	  {"conditions":[{"lastTransitionTime":"2025-01-01T00:00:00Z","message":"","observedGeneration":1,"reason":"ResourceSubmissionComplete","status":"True","type":"ResourceSubmitted"},
	   {"lastTransitionTime":"2025-01-01T00:00:00Z","message":"a ClusterTemplate without a health rule is healthy once stamped","observedGeneration":1,"reason":"AlwaysHealthy","status":"True","type":"Healthy"},
	   {"lastTransitionTime":"2025-01-01T00:00:00Z","message":"","observedGeneration":1,"reason":"Ready","status":"True","type":"Ready"}],
	   "inputs":[{"name":"image-builder"}],"name":"config",
	   "provenance":{"current":{"digest":"0","endedAt":"2025-01-01T00:00:00Z","images":[{"image":"ghcr.io/team/app:main","name":"image","resource":"image-builder"}],"outcome":"Succeeded","ownerGeneration":1,"takenAt":"2025-01-01T00:00:00Z"}},
	   "stampedRef":{"apiVersion":"v1","kind":"ConfigMap","name":"app","namespace":"default","resource":"configmaps"},
	   "templateRef":{"apiVersion":"carto.run/v1alpha1","kind":"ClusterTemplate","name":"config"}}],
	  "supplyChainRef":{"kind":"ClusterSupplyChain","name":"supply-chain"}}}`,
	`{"apiVersion":"v1","data":{"image":"ghcr.io/team/app:main"},"kind":"ConfigMap","metadata":{"annotations":{"kontinue.dev/applied-digest":"0","kontinue.dev/input-set":"0"},"creationTimestamp":"2025-01-01T00:00:00Z",
	 "labels":{"carto.run/cluster-template-name":"config","carto.run/resource-name":"config","carto.run/supply-chain-name":"supply-chain","carto.run/template-kind":"ClusterTemplate",
	  "carto.run/template-lifecycle":"mutable","carto.run/workload-name":"app","carto.run/workload-namespace":"default","kontinue.dev/stamped":"true"},
	 "managedFields":[{"manager":"kontinue","operation":"Update"}],"name":"app","namespace":"default",
	 "ownerReferences":[{"apiVersion":"carto.run/v1alpha1","blockOwnerDeletion":true,"controller":true,"kind":"Workload","name":"app","uid":"0"}],"resourceVersion":"1","uid":"0"}}`,
}

// dict is the s2 dictionary of dictSamples (a few KiB, read-only: safe for
// concurrent use).
var dict = makeDict(dictSamples)

func makeDict(samples []string) *s2.Dict {
	var all []byte
	for _, s := range samples {
		v, ok := jsonvalue.DecodeObject([]byte(s))
		if !ok {
			panic("tracking: a dictionary sample is not a JSON object") // programming error, caught by every test
		}
		doc, _ := jsonvalue.Marshal(v) // as pack marshals
		all = append(all, doc...)
	}
	// An object starts as the samples do: the first match is the repeat.
	return s2.MakeDict(all, []byte(`{"apiVersion":"`))
}

// scratch holds buffers for compressing and decompressing; buffers over
// maxScratch (a rare large object) are left to the GC rather than kept.
var scratch = sync.Pool{New: func() any { b := make([]byte, 0, 8<<10); return &b }}

const maxScratch = 256 << 10

func getScratch() *[]byte { return scratch.Get().(*[]byte) }

func putScratch(b *[]byte, used []byte) {
	if cap(used) <= maxScratch {
		*b = used[:0]
		scratch.Put(b)
	}
}

// compress returns doc compressed, in a slice of its own exactly as long:
// what the cache keeps.
func compress(doc []byte) []byte {
	buf := getScratch()
	out := dict.Encode((*buf)[:cap(*buf)], doc)
	kept := bytes.Clone(out)
	putScratch(buf, out)
	return kept
}

// decompress returns c decompressed, in dst's storage when it fits (dst's
// contents are overwritten), in a new slice otherwise.
func decompress(dst, c []byte) ([]byte, error) {
	doc, err := dict.Decode(dst[:cap(dst)], c)
	if err != nil {
		return nil, fmt.Errorf("decompressing: %w", err)
	}
	return doc, nil
}
