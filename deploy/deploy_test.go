// Package deploy holds the Dockerfile's and the Kubernetes manifests'
// tests: each manifest decodes strictly into the Kubernetes API types, and
// what it asks of the gateway (flags, probe paths, the user) is what the
// gateway has.
package deploy

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"aimon.dev/gw/internal/testkit/gobuild"
)

// manifests are deploy/kubernetes's objects, decoded strictly: a field
// the API type does not have (a typo, a wrong indentation) fails.
type manifests struct {
	deployment *appsv1.Deployment
	service    *corev1.Service
	hpa        *autoscalingv2.HorizontalPodAutoscaler
	pdb        *policyv1.PodDisruptionBudget
	// redis and redisService are the fleet's shared state (rule R10).
	redis        *appsv1.Deployment
	redisService *corev1.Service
}

func load(t *testing.T) manifests {
	t.Helper()
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in deploy/kubernetes: %v", err)
	}
	var m manifests
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		obj, err := decode(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		switch o := obj.(type) {
		case *appsv1.Deployment:
			if o.Name == "aimon-gw" {
				m.deployment = o
			} else {
				m.redis = o
			}
		case *corev1.Service:
			if o.Name == "aimon-gw" {
				m.service = o
			} else {
				m.redisService = o
			}
		case *autoscalingv2.HorizontalPodAutoscaler:
			m.hpa = o
		case *policyv1.PodDisruptionBudget:
			m.pdb = o
		}
	}
	if m.deployment == nil || m.service == nil || m.hpa == nil || m.pdb == nil || m.redis == nil || m.redisService == nil {
		t.Fatalf("deploy/kubernetes needs the aimon-gw Deployment and Service, a HorizontalPodAutoscaler, a PodDisruptionBudget, and Redis's Deployment and Service; got %+v", m)
	}
	return m
}

// decode reads one object into the API type its apiVersion and kind name.
func decode(data []byte) (any, error) {
	if bytes.Contains(data, []byte("\n---")) {
		return nil, fmt.Errorf("holds several documents; keep one object a file")
	}
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(data, &tm); err != nil {
		return nil, err
	}
	var obj any
	switch tm.APIVersion + " " + tm.Kind {
	case "apps/v1 Deployment":
		obj = &appsv1.Deployment{}
	case "v1 Service":
		obj = &corev1.Service{}
	case "autoscaling/v2 HorizontalPodAutoscaler":
		obj = &autoscalingv2.HorizontalPodAutoscaler{}
	case "policy/v1 PodDisruptionBudget":
		obj = &policyv1.PodDisruptionBudget{}
	default:
		return nil, fmt.Errorf("apiVersion %q kind %q is not one this test knows; add its type", tm.APIVersion, tm.Kind)
	}
	if err := yaml.UnmarshalStrict(data, obj); err != nil {
		return nil, fmt.Errorf("does not decode strictly into %s: %v", tm.Kind, err)
	}
	return obj, nil
}

// A manifest with a field its type lacks, or of a kind the test does not
// know, is refused: strict decoding is what makes the checks below mean
// anything.
func TestR3ManifestsDecodeStrictly(t *testing.T) {
	for _, c := range []struct{ note, yaml, want string }{
		{"a misspelt field", "apiVersion: policy/v1\nkind: PodDisruptionBudget\nspec:\n  minAvailabel: 2\n", "unknown field"},
		{"a field at the wrong depth", "apiVersion: v1\nkind: Service\nspec:\n  ports:\n  - port: 80\n    selector: {}\n", "unknown field"},
		{"an unknown kind", "apiVersion: v1\nkind: ConfigMapp\n", "not one this test knows"},
		{"two documents", "apiVersion: v1\nkind: Service\n---\napiVersion: v1\nkind: Service\n", "several documents"},
	} {
		if _, err := decode([]byte(c.yaml)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.note, err, c.want)
		}
	}
}

// The Deployment runs three replicas that every selector finds, each as a
// non-root user that cannot gain privileges, with the policy from git in a
// volume the gateway reads and git-sync writes.
func TestR3DeploymentShape(t *testing.T) {
	m := load(t)
	d := m.deployment
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
		t.Errorf("the Deployment has replicas %v, want 3", d.Spec.Replicas)
	}
	pod := labels.Set(d.Spec.Template.Labels)
	for _, c := range []struct {
		note string
		sel  *metav1.LabelSelector
	}{
		{"the Deployment's selector", d.Spec.Selector},
		{"the PodDisruptionBudget's selector", m.pdb.Spec.Selector},
		{"the Service's selector", &metav1.LabelSelector{MatchLabels: m.service.Spec.Selector}},
	} {
		s, err := metav1.LabelSelectorAsSelector(c.sel)
		if err != nil || s.Empty() || !s.Matches(pod) {
			t.Errorf("%s %v does not select the pods (labels %v): %v", c.note, c.sel, pod, err)
		}
	}
	if m.service.Spec.SessionAffinity != corev1.ServiceAffinityNone {
		t.Errorf("the Service's sessionAffinity is %q: any replica answers any request, so it is None", m.service.Spec.SessionAffinity)
	}
	if r := m.hpa.Spec.ScaleTargetRef; r.Kind != "Deployment" || r.Name != d.Name || r.APIVersion != "apps/v1" {
		t.Errorf("the HorizontalPodAutoscaler scales %+v, not the Deployment %q", r, d.Name)
	}
	if m.hpa.Spec.MinReplicas == nil || *m.hpa.Spec.MinReplicas < 3 || m.hpa.Spec.MaxReplicas < *m.hpa.Spec.MinReplicas {
		t.Errorf("the HorizontalPodAutoscaler ranges %v..%d; it must not scale below the Deployment's 3", m.hpa.Spec.MinReplicas, m.hpa.Spec.MaxReplicas)
	}
	if ma := m.pdb.Spec.MinAvailable; ma == nil || ma.IntValue() < 1 || ma.IntValue() >= 3 {
		t.Errorf("the PodDisruptionBudget's minAvailable is %v; between 1 and 2 of 3 lets a node drain and keeps the gateway up", ma)
	}
	ps := d.Spec.Template.Spec
	if sc := ps.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Errorf("the pod's securityContext %+v does not run as a non-root user", sc)
	}
	for _, c := range append(ps.InitContainers, ps.Containers...) {
		sc := c.SecurityContext
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			t.Errorf("container %s may gain privileges or keeps capabilities: %+v", c.Name, sc)
		}
	}
	gw := container(t, ps.Containers, "aimon-gw")
	policy := flagValue(gw.Args, "policy")
	vol := volumeAt(gw, policy)
	if vol == nil {
		t.Fatalf("--policy=%s is on no volume of the gateway's container", policy)
	}
	if src := podVolume(ps, vol.Name); src == nil || src.EmptyDir == nil {
		t.Errorf("the policy volume %q is not an emptyDir shared in the pod", vol.Name)
	}
	if !vol.ReadOnly {
		t.Errorf("the gateway mounts the policy volume writable; nothing it reads may be writable by a tool (rule R8)")
	}
	for _, c := range append(ps.InitContainers, ps.Containers...) {
		if !strings.HasPrefix(c.Name, "git-sync") {
			continue
		}
		root, link := flagValue(c.Args, "root"), flagValue(c.Args, "link")
		if m := volumeAt(&c, root); m == nil || m.Name != vol.Name {
			t.Errorf("%s syncs into --root=%s, which is not the gateway's policy volume %q", c.Name, root, vol.Name)
		}
		if filepath.Join(root, link) != policy {
			t.Errorf("%s links the checkout at %s, but the gateway reads --policy=%s", c.Name, filepath.Join(root, link), policy)
		}
	}
	if len(ps.InitContainers) == 0 {
		t.Error("no git-sync init container: the gateway's first load would find no policy")
	}
}

func container(t *testing.T, cs []corev1.Container, name string) *corev1.Container {
	t.Helper()
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	t.Fatalf("the pod has no container %q", name)
	return nil
}

// flagValue is the value of --name=value in args; "" when absent.
func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

// volumeAt is the mount of c that holds path.
func volumeAt(c *corev1.Container, path string) *corev1.VolumeMount {
	for i, m := range c.VolumeMounts {
		if path == m.MountPath || strings.HasPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/") {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

func podVolume(ps corev1.PodSpec, name string) *corev1.VolumeSource {
	for _, v := range ps.Volumes {
		if v.Name == name {
			return &v.VolumeSource
		}
	}
	return nil
}

// gatewayBinary builds aimon-gw once for the package's tests.
func gatewayBinary(t *testing.T) string { return gobuild.Binary(t, "aimon.dev/gw/cmd/aimon-gw") }

// TestMain removes the binary the tests built.
func TestMain(m *testing.M) { gobuild.Main(m) }

var helpFlag = regexp.MustCompile(`(?m)^\s+--([a-z0-9-]+)`)

// The gateway container's arguments are a command of the binary and flags
// that command has (read from its --help), and the probes' paths answer on
// a gateway started with those flags.
func TestR3ManifestArgsAreGatewayFlags(t *testing.T) {
	gw := container(t, load(t).deployment.Spec.Template.Spec.Containers, "aimon-gw")
	bin := gatewayBinary(t)
	if len(gw.Args) == 0 || gw.Args[0] != "mcp" {
		t.Fatalf("the gateway container's args %q do not start with the command mcp", gw.Args)
	}
	help, err := exec.Command(bin, "mcp", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("aimon-gw mcp --help: %v\n%s", err, help)
	}
	known := map[string]bool{}
	for _, m := range helpFlag.FindAllStringSubmatch(string(help), -1) {
		known[m[1]] = true
	}
	if !known["listen"] {
		t.Fatalf("aimon-gw mcp --help lists no --listen:\n%s", help)
	}
	for _, a := range gw.Args[1:] {
		name, _, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !ok {
			t.Errorf("argument %q: write flags as --name=value, so that each is checked whole", a)
			continue
		}
		if !known[name] {
			t.Errorf("argument %q: aimon-gw mcp has no flag --%s", a, name)
		}
	}
	for _, p := range []*corev1.Probe{gw.LivenessProbe, gw.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || !slices.ContainsFunc(gw.Ports, func(cp corev1.ContainerPort) bool { return cp.Name == p.HTTPGet.Port.String() }) {
			t.Fatalf("the gateway container needs an HTTP liveness and readiness probe on a named port it declares; got %+v, %+v", gw.LivenessProbe, gw.ReadinessProbe)
		}
	}
	if gw.LivenessProbe.HTTPGet.Path == gw.ReadinessProbe.HTTPGet.Path {
		t.Errorf("liveness and readiness probe the same path %s: a replica without a policy must be alive but not ready", gw.LivenessProbe.HTTPGet.Path)
	}
	// The probes answer 200 on a gateway serving a policy.
	addr := freeAddr(t)
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("sha256:"+strings.Repeat("0", 64)+" probe\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "mcp", "--listen="+addr, "--tokens="+tokens)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	for _, p := range []*corev1.Probe{gw.LivenessProbe, gw.ReadinessProbe} {
		if code := waitOK(addr, p.HTTPGet.Path); code != 200 {
			t.Errorf("GET %s answered %d, want 200; the gateway logged:\n%s", p.HTTPGet.Path, code, stderr.String())
		}
	}
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// waitOK polls path until it answers 200, for at most 30 s (the gateway
// loads its policy first); it returns the last status, 0 for none.
func waitOK(addr, path string) int {
	code := 0
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			continue
		}
		resp.Body.Close()
		if code = resp.StatusCode; code == 200 {
			break
		}
	}
	return code
}

// The image runs the gateway as the user the pod's securityContext names,
// never root, with bubblewrap for the sandbox (rules R6, R8), and with the
// sandbox program beside the gateway (issue 41).
func TestR8DockerfileRunsAsNonRootWithBubblewrap(t *testing.T) {
	data, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var user, stages string
	var bwrap, builds, beside bool
	args := map[string]string{} // ARG defaults, which FROM may name
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) >= 2 && f[0] == "USER":
			user = f[1]
		case len(f) >= 2 && f[0] == "ARG":
			name, value, _ := strings.Cut(f[1], "=")
			args[name] = value
		case len(f) >= 2 && f[0] == "FROM":
			stages += os.Expand(f[1], func(name string) string { return args[name] }) + " "
		case strings.Contains(sc.Text(), "apt-get install") && strings.Contains(sc.Text(), "bubblewrap"):
			bwrap = true
		case len(f) >= 2 && f[0] == "RUN" && strings.Contains(sc.Text(), "go build") && slices.Contains(f, "./cmd/aimon-gw") && slices.Contains(f, "./cmd/aimon-gw-sandbox"):
			builds = true
		case len(f) >= 2 && f[0] == "COPY" && slices.Contains(f, "/out/aimon-gw") && slices.Contains(f, "/out/aimon-gw-sandbox") && f[len(f)-1] == "/usr/local/bin/":
			beside = true
		}
	}
	if !builds || !beside {
		t.Errorf("the image does not build the sandbox program with the gateway (%v) or put it beside it in /usr/local/bin (%v): each sandboxed command would start the 62 MB gateway twice", builds, beside)
	}
	uid, _, _ := strings.Cut(user, ":")
	want := load(t).deployment.Spec.Template.Spec.SecurityContext.RunAsUser
	if uid == "" || uid == "0" || uid == "root" || want == nil || uid != fmt.Sprint(*want) {
		t.Errorf("the image's USER is %q; want the numeric non-root user the pod runs as (%v)", user, want)
	}
	if !bwrap {
		t.Error("the image does not install bubblewrap, the sandbox every command runs in")
	}
	if strings.Count(stages, " ") < 2 || !strings.Contains(stages, "debian") {
		t.Errorf("the image is built in stages %q; want a build stage and a Debian runtime", stages)
	}
}

// TestR10ManifestDrainFitsTheGrace: a stopping pod leaves the endpoints
// (its readiness probe fails) within its --drain-delay, and the delay,
// the drain and the second after them fit terminationGracePeriodSeconds,
// so that a rolling update loses no call and the kubelet kills nothing.
func TestR10ManifestDrainFitsTheGrace(t *testing.T) {
	spec := load(t).deployment.Spec.Template.Spec
	gw := container(t, spec.Containers, "aimon-gw")
	flags := map[string]time.Duration{"drain-delay": 5 * time.Second, "drain": 30 * time.Second} // the defaults
	for _, a := range gw.Args {
		name, value, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if _, ok := flags[name]; ok {
			d, err := time.ParseDuration(value)
			if err != nil {
				t.Fatalf("argument %q: %v", a, err)
			}
			flags[name] = d
		}
	}
	p := gw.ReadinessProbe
	if out := time.Duration(p.PeriodSeconds*max(p.FailureThreshold, 1)) * time.Second; out >= flags["drain-delay"] {
		t.Errorf("the readiness probe takes %s to see a stopping replica, not less than its --drain-delay %s: calls would reach a closed listener", out, flags["drain-delay"])
	}
	need := flags["drain-delay"] + flags["drain"] + time.Second
	if spec.TerminationGracePeriodSeconds == nil || time.Duration(*spec.TerminationGracePeriodSeconds)*time.Second < need {
		t.Errorf("terminationGracePeriodSeconds %v is shorter than --drain-delay + --drain + 1s = %s", spec.TerminationGracePeriodSeconds, need)
	}
}

// TestR10ManifestsShareApprovalState: every replica seals approvals with
// one key from a Secret, readable by the gateway's group alone, and spends
// them in the Redis the manifests run, through a Service that selects it
// on the port it listens on; the decision log is on a volume.
func TestR10ManifestsShareApprovalState(t *testing.T) {
	m := load(t)
	ps := m.deployment.Spec.Template.Spec
	gw := container(t, ps.Containers, "aimon-gw")
	key := flagValue(gw.Args, "approval-key")
	if vm := volumeAt(gw, key); key == "" || vm == nil {
		t.Errorf("--approval-key=%q is on no volume of the gateway's container", key)
	} else if src := podVolume(ps, vm.Name); src == nil || src.Secret == nil || src.Secret.DefaultMode == nil || *src.Secret.DefaultMode&0o027 != 0 {
		t.Errorf("the approval key's volume %q is not a Secret readable by its owner and group alone: %+v", vm.Name, src)
	}
	if dl := flagValue(gw.Args, "decision-log"); dl == "" || volumeAt(gw, dl) == nil {
		t.Errorf("--decision-log=%q is on no volume (the root file system is read-only)", dl)
	}
	state := flagValue(gw.Args, "state")
	host, port, ok := strings.Cut(strings.TrimPrefix(state, "redis://"), ":")
	if !strings.HasPrefix(state, "redis://") || !ok {
		t.Fatalf("--state=%q is not redis://SERVICE:PORT", state)
	}
	svc := m.redisService
	if svc.Name != host {
		t.Errorf("--state names %q, but Redis's Service is %q", host, svc.Name)
	}
	sel, err := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchLabels: svc.Spec.Selector})
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(m.redis.Spec.Template.Labels)) {
		t.Errorf("Redis's Service selector %v does not select Redis's pods %v", svc.Spec.Selector, m.redis.Spec.Template.Labels)
	}
	if len(svc.Spec.Ports) != 1 || fmt.Sprint(svc.Spec.Ports[0].Port) != port {
		t.Errorf("Redis's Service ports %+v do not serve --state's port %s", svc.Spec.Ports, port)
	}
	redis := container(t, m.redis.Spec.Template.Spec.Containers, "redis")
	if len(redis.Ports) != 1 || redis.Ports[0].Name != svc.Spec.Ports[0].TargetPort.String() {
		t.Errorf("Redis's container ports %+v are not the Service's target %v", redis.Ports, svc.Spec.Ports[0].TargetPort)
	}
}
