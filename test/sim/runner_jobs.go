package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/kubeopera/kubeopera/internal/devenv"
)

// jobSyncInterval is how often the actor lists the Jobs and looks at a running Pod: its own
// polling, where the real controller and kubelet react to watch events (the Job controller
// batches a Job's syncs over SyncJobBatchPeriod, 1 s: pkg/controller/job/job_controller.go:71).
const jobSyncInterval = 200 * time.Millisecond

// RunnerJobs plays the Job controller (kube-controller-manager) and the kubelet for the runner
// Jobs in Namespace of the backend cluster — the provisioner's and the gitops-scaffolder's (there
// is neither here: docs/testing.md#actors): it runs the binary of each Job's image (RunnerBinary,
// cmd/terraform-runner, for an image named terraform-runner; Binaries for the others, e.g.
// cmd/scaffold-runner for scaffold-runner) as the Job's one container, with the Pod's identity,
// environment and volumes, and reports the outcome on the Pod and the Job. The runner does its
// own work with the Job ServiceAccount's real RBAC. Sources are
// k8s.io/kubernetes v1.36.3; J is pkg/controller/job/job_controller.go, K is
// pkg/kubelet/kubelet_pods.go.
//
// Job controller:
//   - Jobs whose spec.managedBy is not kubernetes.io/job-controller are skipped (J:963-966),
//     finished Jobs are left alone (J:972), a suspended Job gets no Pod (jobSuspended, J:1767).
//   - The Pod is made from the template as manageJob does (J:1892-1951; GetPodFromTemplate,
//     pkg/controller/controller_utils.go:567-590): generateName "<job>-", the template's labels
//     (with the job-name and controller-uid labels the API server put there:
//     pkg/registry/batch/job/strategy.go:241-281) and annotations, a controller ownerReference
//     and finalizer batch.kubernetes.io/job-tracking (J:2100-2105). Then startTime (J:1051-1054)
//     and active=1 are written together (J:1200-1205).
//   - The Pod ended: SuccessCriteriaMet (CompletionsReached, "Reached expected number of
//     succeeded pods") or FailureTarget (BackoffLimitExceeded, "Job has reached the specified
//     backoff limit") with the Pod in uncountedTerminatedPods; its finalizer removed
//     (J:2107-2118); then succeeded or failed counted with Complete and completionTime or Failed
//     (J:1067, 1085-1089, 1366-1395, 1428-1450, flushUncountedAndRemoveFinalizers 1510-1559,
//     enactJobFinished 1631-1653).
//   - Past startTime + activeDeadlineSeconds (J:1090-1091, 1717-1724): the Pod's finalizer
//     removed and the Pod deleted (deleteActivePods, J:1122-1133, 1300-1312); FailureTarget
//     (DeadlineExceeded, "Job was active longer than specified deadline") with the Pod uncounted,
//     active 0 and terminating 1; then failed 1; Failed only once the Pod has terminated
//     (enactJobFinished, J:1642-1646).
//   - A deleted Job's Pod loses its finalizer (handleSingleOrphanPod, J:827-856); the garbage
//     collector (a real kube-controller-manager here) deletes the Pod.
//
// Kubelet:
//   - The Pod is bound to Node NodeName at creation (the scheduler is not played), whose
//     log endpoint the actor serves (serveLogs).
//   - Volumes: emptyDir an empty directory; configMap and secret as the AtomicWriter writes
//     them (project). Each mountPath maps to its directory (with subPath), and an environment
//     value naming a path under a mountPath is rewritten to it (the runner learns paths only from
//     its environment).
//   - The ServiceAccount token, as KUBECONFIG (writePodKubeconfig); the environment (podSandbox,
//     containerEnv), then the actor's Env and, for terraform-runner, PROVISION_MODULES_DIR=
//     ModulesDir (the modules ship in that image). The container runs its image's binary (its
//     entrypoint: the image's repository name, the last path element without tag or digest,
//     selects RunnerBinary or one of Binaries) with its
//     args expanded (ExpandContainerCommandAndArgs, pkg/kubelet/container/helpers.go:265-280).
//   - Status: phase Running with the container running; then Succeeded or Failed (getPhase,
//     K:1653) with the terminated state: exit code, reason Completed or Error; StartError, exit
//     128 and the error as message when it cannot start (containerd v2
//     internal/cri/server/helpers.go completeExitReason, errorExitReason, errorStartReason,
//     errorStartExitCode; its start path sets Message to the error); 128+signal when killed
//     (exitCode).
//   - A deleted Pod's container is stopped (stopContainer, killGrace); once the Pod is terminal
//     it is deleted with grace 0 and a UID precondition (pkg/kubelet/status/status_manager.go:
//     1210-1217, canBeDeleted 1241-1257).
//
// Left alone: Jobs whose image has no binary here (another actor, e.g. one per service, may run
// them on its own Node). Refused (logged to Log, no Pod): init containers, more than one container,
// a command, completions or parallelism other than 1, backoffLimit other than 0, pod failure and
// success policies, restartPolicy other than Never, automountServiceAccountToken false, volumes
// other than configMap, secret and emptyDir, configMap or secret volumes with items or optional,
// envFrom and valueFrom other than fieldRef metadata.namespace. Not played: Pod conditions, Job
// status.ready, the Suspended condition (and startTime cleared on suspension), suspending a running
// Job, retries, a volume source missing when the Pod starts (the Pod stays Pending; jobs.Create
// makes every source before it un-suspends the Job), security contexts (the runner runs as the
// test's user), resources, service links, TTL after finished.
type RunnerJobs struct {
	// Backend is the backend cluster (an admin config: the actor is the controllers).
	Backend *rest.Config
	// Namespace holds the Jobs (e.g. api.DefaultJobsNamespace).
	Namespace string
	// RunnerBinary is the built cmd/terraform-runner, the binary of images named
	// terraform-runner (e.g. ghcr.io/kubeopera/terraform-runner:v0.1.0).
	RunnerBinary string
	// Binaries are the binaries of other images, by the image's repository name: e.g.
	// "scaffold-runner" -> the built cmd/scaffold-runner.
	Binaries map[string]string
	// ModulesDir is the project's Terraform modules (PROVISION_MODULES_DIR), as the
	// terraform-runner image ships them; empty keeps the Job's value.
	ModulesDir string
	// NodeName is the Node its Pods run on, whose kubelet log endpoint it serves;
	// KubeletNodeName when empty. Two actors on one backend (one per service) need two.
	NodeName string
	// Env is set on top of every container's environment.
	Env map[string]string
	// Log receives the actor's own diagnostics (never a container's log); nil is os.Stderr.
	Log io.Writer

	mu      sync.Mutex
	outputs map[string]*lockedBuffer
	jobs    map[types.UID]*corev1.Pod // the Jobs taken up, with their Pod once created
}

// Output returns the container log of Job name's Pod (as `kubectl logs job/<name>` would), and
// whether its container was started.
func (a *RunnerJobs) Output(name string) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	b, ok := a.outputs[name]
	if !ok {
		return "", false
	}
	return b.String(), true
}

func (a *RunnerJobs) logf(format string, args ...any) {
	w := a.Log
	if w == nil {
		w = os.Stderr
	}
	_, _ = fmt.Fprintf(w, "RunnerJobs: "+format+"\n", args...)
}

// Run plays the controllers until ctx ends.
func (a *RunnerJobs) Run(ctx context.Context) error {
	if a.Backend == nil || a.Namespace == "" || (a.RunnerBinary == "" && len(a.Binaries) == 0) {
		return errors.New("RunnerJobs needs Backend, Namespace and RunnerBinary or Binaries")
	}
	cs, err := kubernetes.NewForConfig(a.Backend)
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.outputs = map[string]*lockedBuffer{}
	a.jobs = map[types.UID]*corev1.Pod{}
	a.mu.Unlock()
	stopLogs, err := a.serveLogs(ctx, cs)
	if err != nil {
		return err
	}
	defer stopLogs()
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(jobSyncInterval)
	defer tick.Stop()
	for {
		jobs, err := cs.BatchV1().Jobs(a.Namespace).List(ctx, metav1.ListOptions{})
		if err == nil {
			seen := map[types.UID]bool{}
			for i := range jobs.Items {
				job := &jobs.Items[i]
				seen[job.UID] = true
				a.mu.Lock()
				_, taken := a.jobs[job.UID]
				a.mu.Unlock()
				if taken || ptr.Deref(job.Spec.ManagedBy, batchv1.JobControllerName) != batchv1.JobControllerName ||
					jobFinished(job) || job.DeletionTimestamp != nil || ptr.Deref(job.Spec.Suspend, false) || !a.runs(job) {
					continue
				}
				a.mu.Lock()
				a.jobs[job.UID] = nil
				a.mu.Unlock()
				wg.Go(func() { a.runJob(ctx, cs, job) })
			}
			// A deleted Job's Pod is an orphan: its finalizer is removed.
			a.mu.Lock()
			for uid, pod := range a.jobs {
				if !seen[uid] && (pod == nil || removeTrackingFinalizer(ctx, cs, pod) == nil) {
					delete(a.jobs, uid)
				}
			}
			a.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// runJob plays the Job controller for job: its Pod, and the Job's status as the Pod runs and ends.
func (a *RunnerJobs) runJob(ctx context.Context, cs kubernetes.Interface, job *batchv1.Job) {
	if reason := unsupported(job); reason != "" {
		a.logf("Job %s uses %s, which RunnerJobs does not play: no Pod", job.Name, reason)
		return
	}
	pod, err := a.createPod(ctx, cs, job)
	if err != nil {
		a.logf("failed to create the Pod of Job %s: %v", job.Name, err)
		return
	}
	a.mu.Lock()
	_, listed := a.jobs[job.UID]
	if listed {
		a.jobs[job.UID] = pod
	}
	a.mu.Unlock()
	if !listed { // the Job was deleted meanwhile: its Pod is an orphan already
		a.report(removeTrackingFinalizer(ctx, cs, pod))
	}
	var started time.Time
	if err := a.updateJobStatus(ctx, cs, job, func(s *batchv1.JobStatus) {
		if s.StartTime == nil {
			now := metav1.Now()
			s.StartTime = &now
		}
		started = s.StartTime.Time
		s.Active, s.Terminating = 1, ptr.To[int32](0)
	}); err != nil {
		a.logf("%v", err)
		return
	}
	ended := make(chan bool, 1)
	exit := 0
	go func() {
		var ran bool
		exit, ran = a.runPod(ctx, cs, job.Name, pod)
		ended <- ran
	}()
	var deadline <-chan time.Time
	if ads := job.Spec.ActiveDeadlineSeconds; ads != nil {
		t := time.NewTimer(time.Until(started.Add(time.Duration(*ads) * time.Second)))
		defer t.Stop()
		deadline = t.C
	}
	select {
	case ran := <-ended:
		if ran {
			a.podEnded(ctx, cs, job, pod, exit == 0)
		}
	case <-deadline:
		a.deadlineExceeded(ctx, cs, job, pod)
		if <-ended {
			a.report(a.updateJobStatus(ctx, cs, job, func(s *batchv1.JobStatus) {
				s.Terminating = ptr.To[int32](0)
				s.Conditions = append(s.Conditions, *newJobCondition(batchv1.JobFailed, batchv1.JobReasonDeadlineExceeded, deadlineMessage))
			}))
		}
	}
}

func (a *RunnerJobs) report(err error) {
	if err != nil {
		a.logf("%v", err)
	}
}

// podEnded plays the syncs that see job's Pod terminal (see RunnerJobs): the interim condition
// with the Pod uncounted, the finalizer removed, then the count and the final condition.
func (a *RunnerJobs) podEnded(ctx context.Context, cs kubernetes.Interface, job *batchv1.Job, pod *corev1.Pod, succeeded bool) {
	interim, final, reason, msg := batchv1.JobFailureTarget, batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit"
	uncounted := batchv1.UncountedTerminatedPods{Failed: []types.UID{pod.UID}}
	if succeeded {
		interim, final, reason, msg = batchv1.JobSuccessCriteriaMet, batchv1.JobComplete, batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods"
		uncounted = batchv1.UncountedTerminatedPods{Succeeded: []types.UID{pod.UID}}
	}
	err := a.updateJobStatus(ctx, cs, job, func(s *batchv1.JobStatus) {
		s.Active, s.UncountedTerminatedPods = 0, &uncounted
		s.Conditions = append(s.Conditions, *newJobCondition(interim, reason, msg))
	})
	if err == nil {
		err = removeTrackingFinalizer(ctx, cs, pod)
	}
	if err == nil {
		err = a.updateJobStatus(ctx, cs, job, func(s *batchv1.JobStatus) {
			s.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
			c := newJobCondition(final, reason, msg)
			s.Conditions = append(s.Conditions, *c)
			if succeeded {
				s.Succeeded++
				s.CompletionTime = &c.LastTransitionTime
			} else {
				s.Failed++
			}
		})
	}
	a.report(err)
}

// deadlineMessage is the Job controller's message for DeadlineExceeded (J:1091).
const deadlineMessage = "Job was active longer than specified deadline"

// deadlineExceeded plays the sync past the Job's deadline up to Failed (see RunnerJobs): the
// Pod's finalizer removed, the Pod deleted with its grace period, then two writes.
func (a *RunnerJobs) deadlineExceeded(ctx context.Context, cs kubernetes.Interface, job *batchv1.Job, pod *corev1.Pod) {
	err := removeTrackingFinalizer(ctx, cs, pod)
	if err == nil {
		if err = cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}); apierrors.IsNotFound(err) {
			err = nil
		}
	}
	if err == nil {
		err = a.updateJobStatus(ctx, cs, job, func(s *batchv1.JobStatus) {
			s.Active, s.Terminating = 0, ptr.To[int32](1)
			s.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{Failed: []types.UID{pod.UID}}
			s.Conditions = append(s.Conditions, *newJobCondition(batchv1.JobFailureTarget, batchv1.JobReasonDeadlineExceeded, deadlineMessage))
		})
	}
	if err == nil {
		err = a.updateJobStatus(ctx, cs, job, func(s *batchv1.JobStatus) {
			s.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
			s.Failed++
		})
	}
	a.report(err)
}

// unsupported names what job uses that the actor does not play, or "".
func unsupported(job *batchv1.Job) string {
	spec := job.Spec.Template.Spec
	switch {
	case len(spec.InitContainers) > 0:
		return "init containers"
	case len(spec.Containers) != 1:
		return "more than one container"
	case len(spec.Containers[0].Command) > 0:
		return "a command (the image's binary is its entrypoint)"
	case ptr.Deref(job.Spec.Completions, 1) != 1 || ptr.Deref(job.Spec.Parallelism, 1) != 1:
		return "completions or parallelism other than 1"
	case ptr.Deref(job.Spec.BackoffLimit, 6) != 0:
		return "backoffLimit other than 0 (retries)"
	case job.Spec.PodFailurePolicy != nil:
		return "a pod failure policy"
	case job.Spec.SuccessPolicy != nil:
		return "a success policy"
	case spec.RestartPolicy != corev1.RestartPolicyNever:
		return "restartPolicy " + string(spec.RestartPolicy)
	case !ptr.Deref(spec.AutomountServiceAccountToken, true):
		return "automountServiceAccountToken false"
	}
	if _, err := containerEnv(&spec.Containers[0], job.Namespace); err != nil {
		return err.Error()
	}
	for _, v := range spec.Volumes {
		switch {
		case v.ConfigMap != nil && (len(v.ConfigMap.Items) > 0 || v.ConfigMap.Optional != nil),
			v.Secret != nil && (len(v.Secret.Items) > 0 || v.Secret.Optional != nil):
			return "volume " + v.Name + " with items or optional"
		case v.ConfigMap == nil && v.Secret == nil && v.EmptyDir == nil && (v.Projected == nil || !isServiceAccountTokenVolume(v)):
			return "volume " + v.Name + " of a type other than configMap, secret or emptyDir"
		}
	}
	return ""
}

// createPod creates job's Pod as manageJob does.
func (a *RunnerJobs) createPod(ctx context.Context, cs kubernetes.Interface, job *batchv1.Job) (*corev1.Pod, error) {
	t := job.Spec.Template.DeepCopy()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    job.Name + "-",
			Labels:          t.Labels,
			Annotations:     t.Annotations,
			Finalizers:      append(t.Finalizers, batchv1.JobTrackingFinalizer),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))},
		},
		Spec: t.Spec,
	}
	pod.Spec.NodeName = a.nodeName()
	return cs.CoreV1().Pods(job.Namespace).Create(ctx, pod, metav1.CreateOptions{})
}

// KubeletNodeName is the Node the actor's Pods run on unless NodeName says otherwise.
const KubeletNodeName = "runner-jobs-kubelet"

func (a *RunnerJobs) nodeName() string {
	if a.NodeName != "" {
		return a.NodeName
	}
	return KubeletNodeName
}

// runs reports whether the actor has the binary of job's (one) container's image.
func (a *RunnerJobs) runs(job *batchv1.Job) bool {
	cs := job.Spec.Template.Spec.Containers
	if len(cs) == 0 {
		return false
	}
	_, ok := a.binary(cs[0].Image)
	return ok
}

// terraformRunner is the repository name of the provisioner's runner image.
const terraformRunner = "terraform-runner"

// binary is the binary that runs image: RunnerBinary for terraform-runner, else Binaries by the
// image's repository name (imageName, as FluxPods selects its controllers).
func (a *RunnerJobs) binary(image string) (string, bool) {
	name := imageName(image)
	if name == terraformRunner && a.RunnerBinary != "" {
		return a.RunnerBinary, true
	}
	bin, ok := a.Binaries[name]
	return bin, ok && bin != ""
}

// serveLogs plays the kubelet's log endpoint, so `kubectl logs` and the provisioner's
// GET /provisions/{id}/logs read the runner's output through the API server as from a real
// kubelet: it registers its Node (NodeName) with an InternalIP and
// status.daemonEndpoints.kubeletEndpoint.port, which the API server dials for pods/log
// (pkg/registry/core/pod/strategy.go:660-665; pkg/kubelet/client/kubelet_client.go:115-130), and
// answers GET /containerLogs/<namespace>/<pod>/<container> over HTTPS with the container's
// output (pkg/kubelet/server/server.go:637-640, 881-883; before the container started, the error
// of K:1580). The API server verifies no kubelet serving certificate unless
// --kubelet-certificate-authority is set, which no backend here sets.
func (a *RunnerJobs) serveLogs(ctx context.Context, cs kubernetes.Interface) (func(), error) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/containerLogs/"), "/")
		if !strings.HasPrefix(r.URL.Path, "/containerLogs/") || len(parts) != 3 {
			http.NotFound(w, r)
			return
		}
		pod, err := cs.CoreV1().Pods(parts[0]).Get(r.Context(), parts[1], metav1.GetOptions{})
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		out, ok := a.Output(pod.Labels[batchv1.JobNameLabel])
		if !ok {
			http.Error(w, fmt.Sprintf("container %q in pod %q is waiting to start: ContainerCreating", parts[2], pod.Name), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, out)
	}))
	_, portStr, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		srv.Close()
		return nil, err
	}
	port, _ := strconv.Atoi(portStr)
	node, err := cs.CoreV1().Nodes().Get(ctx, a.nodeName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		node, err = cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: a.nodeName()}}, metav1.CreateOptions{})
	}
	if err != nil {
		srv.Close()
		return nil, fmt.Errorf("registering the kubelet's Node: %w", err)
	}
	// Only an InternalIP: the API server dials the first of its preferred address types
	// (Hostname first by default: cmd/kube-apiserver/app/options/options.go:75), and the Node's
	// name resolves nowhere here.
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		srv.Close()
		return nil, fmt.Errorf("registering the kubelet's endpoint: %w", err)
	}
	return srv.Close, nil
}

// runPod plays the kubelet for pod of Job job (see RunnerJobs) and returns the container's exit
// code; ran is false when the Pod did not run to an end (the actor stopped, or the Pod needs what
// is not played).
func (a *RunnerJobs) runPod(ctx context.Context, cs kubernetes.Interface, job string, pod *corev1.Pod) (exit int, ran bool) {
	dir, err := os.MkdirTemp("", "pod-"+pod.Name+"-")
	if err != nil {
		a.logf("Pod %s: %v", pod.Name, err)
		return 0, false
	}
	defer func() { _ = os.RemoveAll(dir) }()
	c := pod.Spec.Containers[0]
	mounts, err := a.mountVolumes(ctx, cs, pod, c, filepath.Join(dir, "volumes"))
	if err != nil {
		a.logf("Pod %s: MountVolume failed: %v (not played: the Pod stays Pending)", pod.Name, err)
		return 0, false
	}
	env, err := podSandbox(dir)
	if err != nil {
		a.logf("Pod %s: %v", pod.Name, err)
		return 0, false
	}
	cenv, _ := containerEnv(&c, pod.Namespace) // unsupported has checked it
	for k, v := range cenv {
		if p, ok := mapPath(v, mounts); ok {
			v = p
		}
		env[k] = v
	}
	maps.Copy(env, a.Env)
	if a.ModulesDir != "" && imageName(c.Image) == terraformRunner {
		env["PROVISION_MODULES_DIR"] = a.ModulesDir
	}
	env["KUBECONFIG"] = filepath.Join(dir, "kubeconfig")
	if err := writePodKubeconfig(ctx, a.Backend, pod.Namespace, pod.Spec.ServiceAccountName, pod, 0, env["KUBECONFIG"]); err != nil {
		a.logf("Pod %s: %v", pod.Name, err)
		return 0, false
	}
	args := make([]string, 0, len(c.Args))
	for _, s := range c.Args {
		args = append(args, expandVars(s, cenv))
	}
	bin, _ := a.binary(c.Image) // Run took only Jobs it has the binary of
	cmd := exec.Command(bin, args...)
	cmd.Env = environ(env)
	cmd.Dir = env["TMPDIR"]
	if d, ok := mapPath(c.WorkingDir, mounts); ok {
		cmd.Dir = d
	}
	out := &lockedBuffer{}
	a.mu.Lock()
	a.outputs[job] = out
	a.mu.Unlock()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}

	started := metav1.Now()
	term := &corev1.ContainerStateTerminated{ExitCode: 128, Reason: "StartError", StartedAt: started}
	proc, err := devenv.StartTied(cmd) // the runner dies with this process, as a container with its node
	if err != nil {
		term.Message = err.Error()
	} else {
		_, err := updatePodStatus(ctx, cs, pod, func(s *corev1.PodStatus) {
			s.Phase, s.StartTime = corev1.PodRunning, &started
			s.ContainerStatuses = []corev1.ContainerStatus{{Name: c.Name, Image: c.Image, Ready: true, Started: ptr.To(true),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}}
		})
		a.report(err)
		if a.awaitExit(ctx, cs, pod, cmd, proc) {
			return 0, false
		}
		term.ExitCode, term.Reason = int32(exitCode(proc.Wait())), "Completed"
		if term.ExitCode != 0 {
			term.Reason = "Error"
		}
	}
	term.FinishedAt = metav1.Now()
	cur, err := updatePodStatus(ctx, cs, pod, func(s *corev1.PodStatus) {
		s.Phase = corev1.PodSucceeded
		if term.ExitCode != 0 {
			s.Phase = corev1.PodFailed
		}
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: c.Name, Image: c.Image, Started: ptr.To(false), State: corev1.ContainerState{Terminated: term}}}
	})
	if err == nil && cur.DeletionTimestamp != nil {
		err = cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: metav1.NewUIDPreconditions(string(pod.UID))})
	}
	a.report(err)
	return int(term.ExitCode), true
}

// awaitExit waits until the container exits. When the Pod is deleted (or gone) the kubelet stops
// the container with the Pod's grace period; when ctx ends the actor stops it likewise, as a node
// going away, and awaitExit says so (true).
func (a *RunnerJobs) awaitExit(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, cmd *exec.Cmd, proc *devenv.Child) bool {
	tick := time.NewTicker(jobSyncInterval)
	defer tick.Stop()
	for {
		select {
		case <-proc.Done():
			return false
		case <-ctx.Done():
			stopContainer(cmd, proc.Done(), killGrace(nil, &pod.Spec))
			return true
		case <-tick.C:
		}
		cur, err := cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && cur.UID != pod.UID) {
			stopContainer(cmd, proc.Done(), killGrace(nil, &pod.Spec))
			return false
		}
		if err == nil && cur.DeletionTimestamp != nil {
			stopContainer(cmd, proc.Done(), killGrace(cur.DeletionGracePeriodSeconds, &pod.Spec))
			return false
		}
	}
}

// mountVolumes sets up the volumes c mounts under dir and returns mountPath -> directory.
func (a *RunnerJobs) mountVolumes(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, c corev1.Container, dir string) (map[string]string, error) {
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		i := slices.IndexFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if i < 0 {
			return nil, fmt.Errorf("volume %q is not in the Pod", m.Name)
		}
		v := pod.Spec.Volumes[i]
		if v.Projected != nil {
			continue // kube-api-access: its token is delivered as KUBECONFIG
		}
		target := filepath.Join(dir, v.Name)
		if _, err := os.Stat(target); err != nil {
			if err := a.setUpVolume(ctx, cs, pod, v, target); err != nil {
				return nil, err
			}
		}
		mounts[filepath.Clean(m.MountPath)] = filepath.Join(target, m.SubPath)
	}
	return mounts, nil
}

// setUpVolume writes volume v into target: an empty directory, or the data of a ConfigMap
// (MakePayload, pkg/volume/configmap/configmap.go:263-305; binaryData is not played) or a Secret
// (pkg/volume/secret/secret.go:259) with the volume's defaultMode.
func (a *RunnerJobs) setUpVolume(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, v corev1.Volume, target string) error {
	if v.EmptyDir != nil {
		return os.MkdirAll(target, 0o777)
	}
	if v.ConfigMap != nil {
		cm, err := cs.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("configmap %q: %w", v.ConfigMap.Name, err)
		}
		if len(cm.BinaryData) > 0 {
			return fmt.Errorf("configmap %q has binaryData, which is not played", cm.Name)
		}
		data := map[string][]byte{}
		for k, s := range cm.Data {
			data[k] = []byte(s)
		}
		return project(target, data, ptr.Deref(v.ConfigMap.DefaultMode, corev1.ConfigMapVolumeSourceDefaultMode))
	}
	s, err := cs.CoreV1().Secrets(pod.Namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("secret %q: %w", v.Secret.SecretName, err)
	}
	return project(target, s.Data, ptr.Deref(v.Secret.DefaultMode, corev1.SecretVolumeSourceDefaultMode))
}

// isServiceAccountTokenVolume reports whether v is the kube-api-access volume the ServiceAccount
// admission plugin adds (a projected service account token, kube-root-ca.crt and the namespace).
func isServiceAccountTokenVolume(v corev1.Volume) bool {
	return slices.ContainsFunc(v.Projected.Sources, func(s corev1.VolumeProjection) bool { return s.ServiceAccountToken != nil })
}

// project writes data into target as the kubelet's AtomicWriter does
// (pkg/volume/util/atomic_writer.go): a timestamped "..<time>" directory, mode 0755
// (newTimestampDir, lines 398-412), holding a file per key with mode (writePayloadToDir, lines
// 419-441); a "..data" symlink to it (lines 215-228); and a symlink per key to "..data/<key>"
// (createUserVisibleFiles, lines 467-480). Keys cannot hold a "/" (validation.IsConfigMapKey), so
// without items every file is at the top.
func project(target string, data map[string][]byte, mode int32) error {
	if err := os.MkdirAll(target, 0o755); err != nil {
		return err
	}
	tsDir, err := os.MkdirTemp(target, time.Now().UTC().Format("..2006_01_02_15_04_05."))
	if err == nil {
		err = os.Chmod(tsDir, 0o755)
	}
	if err != nil {
		return err
	}
	for k, v := range data {
		if err := os.WriteFile(filepath.Join(tsDir, k), v, os.FileMode(mode)); err != nil {
			return err
		}
		if err := os.Chmod(filepath.Join(tsDir, k), os.FileMode(mode)); err != nil {
			return err
		}
	}
	if err := os.Symlink(filepath.Base(tsDir), filepath.Join(target, "..data")); err != nil {
		return err
	}
	for k := range data {
		if err := os.Symlink(filepath.Join("..data", k), filepath.Join(target, k)); err != nil {
			return err
		}
	}
	return nil
}

// mapPath maps a path under one of mounts' mountPaths to the volume's directory.
func mapPath(p string, mounts map[string]string) (string, bool) {
	if !filepath.IsAbs(p) {
		return "", false
	}
	p = filepath.Clean(p)
	best := ""
	for m := range mounts {
		if (p == m || strings.HasPrefix(p, m+"/")) && len(m) > len(best) {
			best = m
		}
	}
	if best == "" {
		return "", false
	}
	return filepath.Join(mounts[best], strings.TrimPrefix(p, best)), true
}

// updateJobStatus applies mutate to the current Job's status and writes it (retrying conflicts).
func (a *RunnerJobs) updateJobStatus(ctx context.Context, cs kubernetes.Interface, job *batchv1.Job, mutate func(*batchv1.JobStatus)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := cs.BatchV1().Jobs(job.Namespace).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != job.UID {
			return fmt.Errorf("job %s was replaced", job.Name)
		}
		mutate(&cur.Status)
		_, err = cs.BatchV1().Jobs(job.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("failed to update the status of Job %s: %w", job.Name, err)
		}
		return nil
	})
}

// updatePodStatus applies mutate to the current Pod's status and writes it.
func updatePodStatus(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, mutate func(*corev1.PodStatus)) (*corev1.Pod, error) {
	var out *corev1.Pod
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mutate(&cur.Status)
		out, err = cs.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	return out, err
}

// removeTrackingFinalizer removes batch.kubernetes.io/job-tracking from pod, as
// removeTrackingFinalizerPatch does (a strategic merge patch deleting it from the list).
func removeTrackingFinalizer(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod) error {
	patch := fmt.Appendf(nil, `{"metadata":{"$deleteFromPrimitiveList/finalizers":[%q]}}`, batchv1.JobTrackingFinalizer)
	_, err := cs.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func jobFinished(job *batchv1.Job) bool {
	return slices.ContainsFunc(job.Status.Conditions, func(c batchv1.JobCondition) bool {
		return (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue
	})
}

// newJobCondition is the Job controller's newCondition(t, True, reason, message, now).
func newJobCondition(t batchv1.JobConditionType, reason, message string) *batchv1.JobCondition {
	now := metav1.Now()
	return &batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now, Reason: reason, Message: message}
}

// lockedBuffer is a container log written by the runner's stdout and stderr at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
