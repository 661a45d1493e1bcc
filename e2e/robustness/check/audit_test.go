package check

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadAudit(t *testing.T) {
	deep := strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001)
	log := strings.Join([]string{
		// A create by Kontinue as a tenant's account, with its body.
		`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"RequestResponse","auditID":"1","stage":"ResponseComplete",` +
			`"requestURI":"/api/v1/namespaces/t1/configmaps","verb":"create","user":{"username":"` + kontinue + `"},` +
			`"impersonatedUser":{"username":"system:serviceaccount:t1:builder"},` +
			`"objectRef":{"resource":"configmaps","namespace":"t1","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":201},` +
			`"responseObject":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"app-src","namespace":"t1","uid":"u1","resourceVersion":"42",` +
			`"labels":{"carto.run/resource-name":"src"},"ownerReferences":[{"kind":"Workload","name":"app","uid":"w1","controller":true}]},"data":{"n":"9007199254740993"}},` +
			`"stageTimestamp":"2026-01-02T03:04:05.123456Z"}`,
		// Not the stage the checks read.
		`{"kind":"Event","stage":"ResponseStarted","verb":"watch","stageTimestamp":"2026-01-02T03:04:06Z"}`,
		// A delete answered with a Status naming the uid.
		`{"kind":"Event","stage":"ResponseComplete","verb":"delete","user":{"username":"person-a"},` +
			`"objectRef":{"resource":"configmaps","namespace":"t1","name":"app-src"},"responseStatus":{"code":200},` +
			`"responseObject":{"kind":"Status","status":"Success","details":{"name":"app-src","kind":"configmaps","uid":"u1"}},` +
			`"stageTimestamp":"2026-01-02T03:04:07Z"}`,
		// An object 10,001 levels deep is read like any other.
		`{"kind":"Event","stage":"ResponseComplete","verb":"create","user":{"username":"person-b"},` +
			`"objectRef":{"resource":"widgets","apiGroup":"robustness.kontinue.dev","namespace":"t2"},"responseStatus":{"code":201},` +
			`"responseObject":{"kind":"Widget","metadata":{"name":"deep","namespace":"t2","uid":"u2"},"spec":` + deep + `},` +
			`"stageTimestamp":"2026-01-02T03:04:08Z"}`,
		// A create refused (the name is taken): what was meant is the request's.
		`{"kind":"Event","stage":"ResponseComplete","verb":"create","user":{"username":"` + kontinue + `"},` +
			`"objectRef":{"resource":"configmaps","namespace":"t1","name":"app-x1"},"responseStatus":{"code":409},` +
			`"requestObject":{"kind":"ConfigMap","metadata":{"name":"app-x1","namespace":"t1","labels":{"carto.run/resource-name":"cfg"}}},` +
			`"responseObject":{"kind":"Status","status":"Failure","reason":"AlreadyExists","code":409},` +
			`"stageTimestamp":"2026-01-02T03:04:09Z"}`,
		// The last line of a log being written, cut.
		`{"kind":"Event","stage":"Respon`,
	}, "\n")
	evs, err := ReadAudit(strings.NewReader(log), nil)
	require.NoError(t, err)
	require.Len(t, evs, 4)

	c := evs[0]
	assert.Equal(t, "create", c.Verb)
	assert.Equal(t, kontinue, c.User)
	assert.Equal(t, "system:serviceaccount:t1:builder", c.As)
	assert.True(t, c.Creates())
	assert.Equal(t, Key{Resource: "configmaps", Namespace: "t1", Name: "app-src"}, c.Key(), "the name comes from the response")
	assert.Equal(t, "u1", c.Obj.UID)
	assert.Equal(t, int64(42), c.Obj.ResourceVersion)
	assert.Equal(t, Role{OwnerKind: "Workload", OwnerName: "app", OwnerUID: "w1", Step: "src"}, RoleOf(c.Obj))
	assert.Contains(t, string(c.Response), `"n":"9007199254740993"`)

	d := evs[1]
	assert.Equal(t, "delete", d.Verb)
	assert.Equal(t, "u1", d.Obj.UID, "a Status names the uid deleted")

	w := evs[2]
	assert.Equal(t, "u2", w.Obj.UID)
	assert.Equal(t, "robustness.kontinue.dev", w.Group)

	r := evs[3]
	assert.False(t, r.OK())
	assert.Nil(t, r.Obj)
	require.NotNil(t, r.Req)
	assert.Equal(t, "cfg", RoleOf(r.Req).Step, "a refused write keeps what it meant")
	assert.Nil(t, c.Req, "no request object recorded")

	kept, err := ReadAudit(strings.NewReader(log), func(e *Event) bool { return e.Namespace == "t2" })
	require.NoError(t, err)
	assert.Len(t, kept, 1)
}

func TestIncarnationsOrderByResourceVersion(t *testing.T) {
	b := newBuilder()
	// The log has the update before the create (concurrent writers).
	u := b.write(1, "update", "person-a", "", "configmaps", 200, object("ConfigMap", "t1", "x", "u1"))
	c := b.write(2, "create", "person-a", "", "configmaps", 201, object("ConfigMap", "t1", "x", "u1"))
	c.Obj.ResourceVersion, u.Obj.ResourceVersion = 5, 9
	b.write(3, "create", "person-a", "", "configmaps", 409, object("ConfigMap", "t1", "x", "u1"))
	in := b.h.Incarnations()["u1"]
	require.NotNil(t, in)
	assert.Equal(t, c, in.Created)
	assert.Equal(t, []*Event{c, u}, in.Writes, "creation first, failed writes left out")
}
