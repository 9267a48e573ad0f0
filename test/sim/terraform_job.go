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
	"sync/atomic"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/kubeopera/kubeopera/internal/devenv"
)

// The Job controller's and kubelet's constants the TerraformJob actor plays (Kubernetes v1.36.3).
const (
	// jobControllerName is spec.managedBy of the Jobs the built-in controller syncs
	// (batchv1.JobControllerName); Jobs managed by another controller are left alone.
	jobControllerName = batchv1.JobControllerName
	// Pod failure backoff: 10 s doubled per consecutive failure, at most 10 minutes
	// (pkg/controller/job/job_controller.go lines 76-79, backoff_utils.go lines 258-279).
	jobPodFailureBackOff    = 10 * time.Second
	maxJobPodFailureBackOff = 10 * time.Minute
	// jobSyncInterval is how often the actor lists the namespace's Jobs.
	jobSyncInterval = 200 * time.Millisecond
	// tokenExpirationSeconds is what the kube-api-access volume asks the kubelet for
	// (plugin/pkg/admission/serviceaccount/admission.go line 493:
	// serviceaccount.WarnOnlyBoundTokenExpirationSeconds = 60*60 + 7, pkg/serviceaccount/claims.go).
	tokenExpirationSeconds = 3607
	// mountRetry is how often a volume the kubelet cannot set up yet is tried again.
	mountRetry = time.Second
)

// TerraformJob plays the Job controller (kube-controller-manager) and the kubelet for the
// provisioner's Jobs in Namespace of the backend cluster (there is neither here: docs/testing.md#actors):
// for each Job it runs RunnerBinary (cmd/terraform-runner, built by the test) as the
// Job's one container, with the identity, environment and volumes the Pod would have, and
// reports the outcome on the Pod and the Job as v1.36 does. It plays nothing else: the runner
// does its own work against the API server with the Job ServiceAccount's real RBAC.
//
// Job controller (k8s.io/kubernetes v1.36.3, pkg/controller/job/job_controller.go):
//   - Jobs with spec.managedBy other than kubernetes.io/job-controller are skipped (JobManagedBy,
//     GA in 1.35); finished Jobs (Complete or Failed) are left alone.
//   - A suspended Job gets condition Suspended=True (reason JobSuspended) and no Pod; when it is
//     resumed the condition turns False (reason JobResumed) and startTime is set then
//     (syncJob, lines 1162-1192; ensureJobConditionStatus, lines 2161-2174). v1.36 also clears
//     startTime when it sets Suspended=True (lines 1172-1174,
//     MutableSchedulingDirectivesForSuspendedJobs, Beta and on by default since 1.36).
//   - startTime is set on the first sync of an unsuspended Job (lines 1051-1054).
//   - The Pod is made from the template as manageJob does (lines 1892-1951): generateName
//     "<job>-", the template's labels (the API server put batch.kubernetes.io/job-name,
//     job-name, batch.kubernetes.io/controller-uid and controller-uid there:
//     pkg/registry/batch/job/strategy.go, generateSelector, lines 241-281) and annotations, a
//     controller ownerReference to the Job, and finalizer batch.kubernetes.io/job-tracking
//     (appendJobCompletionFinalizerIfNotFound, lines 2100-2105;
//     pkg/controller/controller_utils.go GetPodFromTemplate, lines 567-590); status active=1.
//   - When the Pod ends, its tracking finalizer is removed (removeTrackingFinalizerPatch, lines
//     2107-2118) and it is counted in succeeded or failed. Success: condition SuccessCriteriaMet
//     (reason CompletionsReached, "Reached expected number of succeeded pods") is written first,
//     then Complete with the same reason and completionTime (newSuccessCondition, lines
//     1221-1232; trackJobStatusAndRemoveFinalizers, lines 1440-1450; enactJobFinished, lines
//     1648-1652). Failure beyond spec.backoffLimit: FailureTarget (reason BackoffLimitExceeded,
//     "Job has reached the specified backoff limit"), then Failed with the same reason
//     (lines 1085-1090, 1428-1438, newFailedConditionForFailureTarget). Within the limit a new
//     Pod is made after the pod failure backoff. Past startTime + activeDeadlineSeconds:
//     FailureTarget (reason DeadlineExceeded, "Job was active longer than specified deadline"),
//     the Pod deleted with its grace period (the kubelet stops the runner: SIGTERM, SIGKILL
//     after terminationGracePeriodSeconds), and once it has terminated, Failed (lines 1088-1135,
//     1717-1724). The API server validates these transitions
//     (pkg/registry/batch/job/strategy.go, status update validation), so a wrong order fails.
//
// Kubelet:
//   - Volumes are set up as the kubelet projects them: a ConfigMap or Secret volume is a
//     directory with a file per key (or per items entry), mode defaultMode (0644), written the
//     kubelet's way: the data in a timestamped "..<time>" directory, a "..data" symlink to it,
//     and a symlink per key to "..data/<key>" (pkg/volume/util/atomic_writer.go lines 139-250,
//     457-496; pkg/volume/configmap/configmap.go MakePayload lines 263-305, secret likewise).
//     An emptyDir is an empty directory. A volume whose ConfigMap or Secret is missing keeps
//     the Pod Pending and is retried, as the kubelet does. Each mountPath maps to its directory
//     (with subPath), and every environment value naming a path under a mountPath is rewritten
//     to the directory (the runner only learns paths from its environment).
//   - The ServiceAccount token: the kubelet projects a token bound to the Pod (TokenRequest,
//     expirationSeconds 3607) into the kube-api-access volume the ServiceAccount admission
//     plugin adds. rest.InClusterConfig reads fixed paths under /var/run/secrets, so the actor
//     requests exactly that token (TokenRequest for spec.serviceAccountName, bound to the Pod)
//     and hands it to the runner as a kubeconfig in KUBECONFIG; the runner's RBAC is the real
//     one.
//   - The container's environment: env values with $(VAR) references expanded, valueFrom
//     fieldRef (metadata.name, metadata.namespace, metadata.uid, metadata.labels['k'],
//     metadata.annotations['k'], spec.serviceAccountName, spec.nodeName), secretKeyRef and
//     configMapKeyRef, and envFrom; then the actor's Env on top (e.g. AWS_ENDPOINT_URL of the
//     test's AWS), and PROVISION_MODULES_DIR=ModulesDir (the modules ship in the runner's image).
//     PATH comes from the test process (the image's PATH), HOME and TMPDIR are the Pod's own.
//   - The container runs RunnerBinary with the container's args (its command is the image's
//     entrypoint, which RunnerBinary stands in for); stdout and stderr are kept together
//     (Output) as a container log is. Status: Running with the container's running state and
//     Ready=True; then Succeeded or Failed with the terminated state (exit code, reason
//     Completed or Error as containerd's CRI reports, startedAt, finishedAt) and Ready=False
//     (reason PodCompleted or PodFailed) (pkg/kubelet/kubelet_pods.go lines 2361-2369;
//     pkg/kubelet/status/generate.go). A Job deleted while its Pod runs stops the runner with
//     SIGTERM and, after the Pod's terminationGracePeriodSeconds, SIGKILL.
//
// Refused rather than run differently from Kubernetes (an error in Output, no Pod): init
// containers, more than one container, completions or parallelism other than 1, pod failure and
// success policies, a restartPolicy other than Never, volume types other than configMap, secret,
// emptyDir and the service account token. The scheduler is not played: every Pod is bound to
// Node KubeletNodeName at creation, whose kubelet log endpoint the actor serves (serveLogs), so
// `kubectl logs` works. Not played at all: security contexts (the runner runs as the test's user), resource limits, TTL after finished.
type TerraformJob struct {
	// Backend is the backend cluster (an admin config: the actor is the controllers).
	Backend *rest.Config
	// Namespace holds the Jobs (e.g. api.DefaultJobsNamespace).
	Namespace string
	// RunnerBinary is the built cmd/terraform-runner.
	RunnerBinary string
	// ModulesDir is the project's Terraform modules (PROVISION_MODULES_DIR), as the runner's
	// image ships them; empty keeps the Job's value.
	ModulesDir string
	// Env is set on top of the container's environment.
	Env map[string]string

	mu      sync.Mutex
	outputs map[string]*lockedBuffer
	running map[types.UID]context.CancelFunc
}

// Output returns the combined output of the last Pod of Job name (as `kubectl logs job/<name>`
// would), and whether a Pod of it ran.
func (a *TerraformJob) Output(name string) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	b, ok := a.outputs[name]
	if !ok {
		return "", false
	}
	return b.String(), true
}

// Run plays the controllers until ctx ends.
func (a *TerraformJob) Run(ctx context.Context) error {
	if a.Backend == nil || a.Namespace == "" || a.RunnerBinary == "" {
		return errors.New("TerraformJob needs Backend, Namespace and RunnerBinary")
	}
	cs, err := kubernetes.NewForConfig(a.Backend)
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.outputs = map[string]*lockedBuffer{}
	a.running = map[types.UID]context.CancelFunc{}
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
				if a.sync(ctx, cs, job) {
					jobCtx, cancel := context.WithCancel(ctx)
					a.mu.Lock()
					a.running[job.UID] = cancel
					a.mu.Unlock()
					wg.Add(1)
					go func() {
						defer wg.Done()
						a.runJob(jobCtx, cs, job)
						a.mu.Lock()
						delete(a.running, job.UID)
						a.mu.Unlock()
						cancel()
					}()
				}
			}
			// A deleted Job's Pod is stopped (the garbage collector deletes it, and the
			// kubelet kills its containers).
			a.mu.Lock()
			for uid, cancel := range a.running {
				if !seen[uid] {
					cancel()
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

// sync handles what needs no Pod (skipped, finished and suspended Jobs) and says whether the Job
// needs its Pod run.
func (a *TerraformJob) sync(ctx context.Context, cs kubernetes.Interface, job *batchv1.Job) bool {
	if by := ptr.Deref(job.Spec.ManagedBy, jobControllerName); by != jobControllerName || jobFinished(job) || job.DeletionTimestamp != nil {
		return false
	}
	a.mu.Lock()
	_, running := a.running[job.UID]
	a.mu.Unlock()
	if running {
		return false
	}
	if ptr.Deref(job.Spec.Suspend, false) {
		if c := jobCondition(job, batchv1.JobSuspended); c == nil || c.Status != corev1.ConditionTrue {
			_ = a.updateJobStatus(ctx, cs, job, func(s *batchv1.JobStatus) {
				s.Conditions = ensureJobCondition(s.Conditions, batchv1.JobSuspended, corev1.ConditionTrue, "JobSuspended", "Job suspended")
				s.StartTime = nil // v1.36, MutableSchedulingDirectivesForSuspendedJobs (on by default)
			})
		}
		return false
	}
	return true
}

// runJob runs Pods for job until it is finished or ctx ends.
func (a *TerraformJob) runJob(ctx context.Context, cs kubernetes.Interface, job *batchv1.Job) {
	out := &lockedBuffer{}
	a.mu.Lock()
	a.outputs[job.Name] = out
	a.mu.Unlock()
	var started time.Time
	err := a.updateJobStatus(ctx, cs, job, func(s *batchv1.JobStatus) {
		now := metav1.Now()
		if c := jobCondition(job, batchv1.JobSuspended); c != nil && c.Status == corev1.ConditionTrue {
			s.Conditions = ensureJobCondition(s.Conditions, batchv1.JobSuspended, corev1.ConditionFalse, "JobResumed", "Job resumed")
			s.StartTime = &now
		}
		if s.StartTime == nil {
			s.StartTime = &now
		}
		started = s.StartTime.Time
	})
	if err != nil {
		out.printf("actor: failed to start Job %s: %v\n", job.Name, err)
		return
	}
	if reason := unsupported(job); reason != "" {
		out.printf("actor: Job %s uses %s, which TerraformJob does not play\n", job.Name, reason)
		return
	}
	// activeDeadlineSeconds counts from startTime (pastActiveDeadline, lines 1717-1724).
	var deadline time.Time
	if ads := job.Spec.ActiveDeadlineSeconds; ads != nil {
		deadline = started.Add(time.Duration(*ads) * time.Second)
	}
	for {
		pod, err := a.createPod(ctx, cs, job)
		if err != nil {
			out.printf("actor: failed to create the Pod of Job %s: %v\n", job.Name, err)
			return
		}
		if err := a.updateJobStatus(ctx, cs, job, func(s *batchv1.JobStatus) {
			s.Active, s.Ready, s.Terminating = 1, ptr.To[int32](0), ptr.To[int32](0)
		}); err != nil {
			out.printf("actor: %v\n", err)
			return
		}
		out = &lockedBuffer{}
		a.mu.Lock()
		a.outputs[job.Name] = out
		a.mu.Unlock()
		exitCode, pastDeadline, err := a.runPod(ctx, cs, job, pod, deadline, out)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			out.printf("actor: %v\n", err)
			return
		}
		// The Job controller removes the Pod's tracking finalizer, then counts it.
		if err := removeTrackingFinalizer(context.WithoutCancel(ctx), cs, pod); err != nil {
			out.printf("actor: %v\n", err)
			return
		}
		if pastDeadline {
			// The FailureTarget condition was written when the Pod was deleted; once it has
			// terminated, it is counted and the Job is Failed.
			_ = a.updateJobStatus(ctx, cs, job, func(s *batchv1.JobStatus) {
				s.Failed++
				s.Active, s.Ready, s.Terminating = 0, ptr.To[int32](0), ptr.To[int32](0)
				s.Conditions = append(s.Conditions, *jobCondition2(batchv1.JobFailed, batchv1.JobReasonDeadlineExceeded, deadlineMessage))
			})
			return
		}
		if exitCode == 0 {
			_ = a.updateJobStatus(ctx, cs, job, func(s *batchv1.JobStatus) {
				s.Succeeded++
				s.Active, s.Ready, s.Terminating = 0, ptr.To[int32](0), ptr.To[int32](0)
				s.Conditions = append(s.Conditions, *jobCondition2(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods"))
			})
			_ = a.updateJobStatus(ctx, cs, job, func(s *batchv1.JobStatus) {
				c := jobCondition2(batchv1.JobComplete, batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods")
				s.Conditions = append(s.Conditions, *c)
				s.CompletionTime = &c.LastTransitionTime
			})
			return
		}
		var failed int32
		_ = a.updateJobStatus(ctx, cs, job, func(s *batchv1.JobStatus) {
			s.Failed++
			failed = s.Failed
			s.Active, s.Ready, s.Terminating = 0, ptr.To[int32](0), ptr.To[int32](0)
		})
		if failed > ptr.Deref(job.Spec.BackoffLimit, 6) {
			const msg = "Job has reached the specified backoff limit"
			_ = a.updateJobStatus(ctx, cs, job, func(s *batchv1.JobStatus) {
				s.Conditions = append(s.Conditions, *jobCondition2(batchv1.JobFailureTarget, batchv1.JobReasonBackoffLimitExceeded, msg))
			})
			_ = a.updateJobStatus(ctx, cs, job, func(s *batchv1.JobStatus) {
				s.Conditions = append(s.Conditions, *jobCondition2(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded, msg))
			})
			return
		}
		backoff := jobPodFailureBackOff
		for i := int32(1); i < failed && backoff < maxJobPodFailureBackOff; i++ {
			backoff = min(backoff*2, maxJobPodFailureBackOff)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
	}
}

// deadlineMessage is the Job controller's message for DeadlineExceeded (syncJob, line 1091).
const deadlineMessage = "Job was active longer than specified deadline"

// deadlineExceeded plays syncJob past the Job's activeDeadlineSeconds (lines 1088-1135): the
// FailureTarget condition (reason DeadlineExceeded), and the active Pod deleted (with its
// terminationGracePeriodSeconds; the kubelet then stops its container) and counted as
// terminating.
func (a *TerraformJob) deadlineExceeded(ctx context.Context, cs kubernetes.Interface, job *batchv1.Job, pod *corev1.Pod) {
	_ = a.updateJobStatus(ctx, cs, job, func(s *batchv1.JobStatus) {
		s.Active, s.Ready, s.Terminating = 0, ptr.To[int32](0), ptr.To[int32](1)
		s.Conditions = append(s.Conditions, *jobCondition2(batchv1.JobFailureTarget, batchv1.JobReasonDeadlineExceeded, deadlineMessage))
	})
	_ = cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: pod.Spec.TerminationGracePeriodSeconds})
}

// unsupported names what job uses that the actor does not play, or "".
func unsupported(job *batchv1.Job) string {
	spec := job.Spec.Template.Spec
	switch {
	case len(spec.InitContainers) > 0:
		return "init containers"
	case len(spec.Containers) != 1:
		return "more than one container"
	case ptr.Deref(job.Spec.Completions, 1) != 1 || ptr.Deref(job.Spec.Parallelism, 1) != 1:
		return "completions or parallelism other than 1"
	case job.Spec.PodFailurePolicy != nil:
		return "a pod failure policy"
	case job.Spec.SuccessPolicy != nil:
		return "a success policy"
	case spec.RestartPolicy != corev1.RestartPolicyNever:
		return "restartPolicy " + string(spec.RestartPolicy)
	}
	for _, v := range spec.Volumes {
		if v.ConfigMap == nil && v.Secret == nil && v.EmptyDir == nil && (v.Projected == nil || !isServiceAccountTokenVolume(v)) {
			return "volume " + v.Name + " of a type other than configMap, secret or emptyDir"
		}
	}
	return ""
}

// createPod creates job's Pod as manageJob does.
func (a *TerraformJob) createPod(ctx context.Context, cs kubernetes.Interface, job *batchv1.Job) (*corev1.Pod, error) {
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
	// Bound to the kubelet this actor plays (see serveLogs), as the scheduler would bind it.
	pod.Spec.NodeName = KubeletNodeName
	return cs.CoreV1().Pods(job.Namespace).Create(ctx, pod, metav1.CreateOptions{})
}

// KubeletNodeName is the Node the actor's Pods run on.
const KubeletNodeName = "terraform-job-kubelet"

// serveLogs plays the kubelet's log endpoint, so `kubectl logs` and the provisioner's
// GET /provisions/{id}/logs read the runner's output through the API server as they do from a
// real kubelet: it registers Node KubeletNodeName with an InternalIP and
// status.daemonEndpoints.kubeletEndpoint.port, which the API server dials for pods/log
// (pkg/registry/core/pod/strategy.go LogLocation -> the node's connection info,
// pkg/kubelet/client/kubelet_client.go NodeConnectionInfoGetter), and answers
// GET /containerLogs/<namespace>/<pod>/<container> over HTTPS with the container's output
// (pkg/kubelet/server/server.go, route containerLogs). The API server verifies no kubelet serving
// certificate unless --kubelet-certificate-authority is set, which no backend here sets.
func (a *TerraformJob) serveLogs(ctx context.Context, cs kubernetes.Interface) (func(), error) {
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
			http.Error(w, "container not started", http.StatusBadRequest)
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
	node, err := cs.CoreV1().Nodes().Get(ctx, KubeletNodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		node, err = cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: KubeletNodeName}}, metav1.CreateOptions{})
	}
	if err != nil {
		srv.Close()
		return nil, fmt.Errorf("registering the kubelet's Node: %w", err)
	}
	// Only an InternalIP: the API server dials the first of its preferred address types
	// (Hostname first by default), and the Node's name resolves nowhere here.
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		srv.Close()
		return nil, fmt.Errorf("registering the kubelet's endpoint: %w", err)
	}
	return srv.Close, nil
}

// runPod plays the kubelet for pod: volumes, token, environment, the container, the status. It
// returns the container's exit code and whether the Job's deadline stopped it; an error means
// the Pod could not be run at all.
func (a *TerraformJob) runPod(ctx context.Context, cs kubernetes.Interface, job *batchv1.Job, pod *corev1.Pod, deadline time.Time, out *lockedBuffer) (int, bool, error) {
	// podCtx ends when the Pod is deleted by the deadline (or the Job): the container is stopped.
	podCtx, stop := context.WithCancel(ctx)
	defer stop()
	var pastDeadline atomic.Bool
	if !deadline.IsZero() {
		timer := time.AfterFunc(time.Until(deadline), func() {
			pastDeadline.Store(true)
			a.deadlineExceeded(ctx, cs, job, pod)
			stop()
		})
		defer timer.Stop()
	}
	dir, err := os.MkdirTemp("", "pod-"+pod.Name+"-")
	if err != nil {
		return 0, false, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	c := pod.Spec.Containers[0]

	// Volumes: retried while what they project is missing, as the kubelet keeps a Pod
	// ContainerCreating until its volumes mount.
	var mounts map[string]string
	for {
		mounts, err = a.mountVolumes(ctx, cs, pod, c, filepath.Join(dir, "volumes"))
		if err == nil {
			break
		}
		out.printf("actor: MountVolume failed for Pod %s: %v\n", pod.Name, err)
		select {
		case <-podCtx.Done():
			return 137, pastDeadline.Load(), ctx.Err()
		case <-time.After(mountRetry):
		}
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := a.writeServiceAccountKubeconfig(ctx, cs, pod, kubeconfig); err != nil {
		return 0, false, err
	}
	// The image's environment (PATH; HOME and TMPDIR the Pod's own), then the container's.
	for _, d := range []string{"home", "tmp"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			return 0, false, err
		}
	}
	env := map[string]string{"PATH": os.Getenv("PATH"), "HOME": filepath.Join(dir, "home"), "TMPDIR": filepath.Join(dir, "tmp")}
	cenv, err := a.containerEnv(ctx, cs, pod, c, mounts)
	if err != nil {
		return 0, false, fmt.Errorf("failed to set up the environment of Pod %s: %w", pod.Name, err)
	}
	maps.Copy(env, cenv)
	env["KUBECONFIG"] = kubeconfig

	started := metav1.Now()
	if err := updatePodStatus(ctx, cs, pod, func(s *corev1.PodStatus) {
		s.Phase = corev1.PodRunning
		s.StartTime = &started
		s.Conditions = setPodCondition(s.Conditions, corev1.PodReady, corev1.ConditionTrue, "")
		s.ContainerStatuses = []corev1.ContainerStatus{{
			Name: c.Name, Image: c.Image, Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
		}}
	}); err != nil {
		return 0, false, err
	}
	if !pastDeadline.Load() {
		_ = a.updateJobStatus(ctx, cs, job, func(s *batchv1.JobStatus) { s.Ready = ptr.To[int32](1) })
	}

	cmd := exec.CommandContext(podCtx, a.RunnerBinary, c.Args...)
	cmd.Env = environ(env)
	cmd.Dir = filepath.Join(dir, "tmp")
	if c.WorkingDir != "" {
		if d, ok := mapPath(c.WorkingDir, mounts); ok {
			cmd.Dir = d
		}
	}
	cmd.Stdout, cmd.Stderr = out, out
	// The kubelet stops a container with SIGTERM and, after the grace period, SIGKILL.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = time.Duration(ptr.Deref(pod.Spec.TerminationGracePeriodSeconds, corev1.DefaultTerminationGracePeriodSeconds)) * time.Second
	// The runner dies with this process, as a container with its node (devenv.StartTied).
	runErr := func() error {
		proc, err := devenv.StartTied(cmd)
		if err != nil {
			return err
		}
		return proc.Wait()
	}()
	exitCode := 0
	var exitErr *exec.ExitError
	switch {
	case runErr == nil:
	case errors.As(runErr, &exitErr):
		exitCode = exitErr.ExitCode()
		if exitCode < 0 { // killed by a signal
			exitCode = 137
		}
	default:
		out.printf("actor: failed to start the container: %v\n", runErr)
		exitCode = 128
	}
	if ctx.Err() != nil {
		return exitCode, false, ctx.Err()
	}
	finished := metav1.Now()
	phase, reason, readyReason := corev1.PodSucceeded, "Completed", "PodCompleted"
	if exitCode != 0 {
		phase, reason, readyReason = corev1.PodFailed, "Error", "PodFailed"
	}
	err = updatePodStatus(ctx, cs, pod, func(s *corev1.PodStatus) {
		s.Phase = phase
		s.Conditions = setPodCondition(s.Conditions, corev1.PodReady, corev1.ConditionFalse, readyReason)
		s.ContainerStatuses = []corev1.ContainerStatus{{
			Name: c.Name, Image: c.Image, Ready: false, Started: ptr.To(false),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: int32(exitCode), Reason: reason, StartedAt: started, FinishedAt: finished,
			}},
		}}
	})
	return exitCode, pastDeadline.Load(), err
}

// mountVolumes sets up the volumes c mounts under dir and returns mountPath -> directory.
func (a *TerraformJob) mountVolumes(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, c corev1.Container, dir string) (map[string]string, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		i := slices.IndexFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if i < 0 {
			return nil, fmt.Errorf("volume %q is not in the Pod", m.Name)
		}
		v := pod.Spec.Volumes[i]
		if v.Projected != nil && isServiceAccountTokenVolume(v) {
			continue // its token is delivered as KUBECONFIG
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

// setUpVolume writes volume v into target.
func (a *TerraformJob) setUpVolume(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, v corev1.Volume, target string) error {
	switch {
	case v.EmptyDir != nil:
		return os.MkdirAll(target, 0o777)
	case v.ConfigMap != nil:
		cm, err := cs.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
		optional := ptr.Deref(v.ConfigMap.Optional, false)
		if apierrors.IsNotFound(err) && optional {
			return os.MkdirAll(target, 0o777)
		}
		if err != nil {
			return fmt.Errorf("configmap %q: %w", v.ConfigMap.Name, err)
		}
		data := map[string][]byte{}
		for k, s := range cm.Data {
			data[k] = []byte(s)
		}
		maps.Copy(data, cm.BinaryData)
		return project(target, data, v.ConfigMap.Items, ptr.Deref(v.ConfigMap.DefaultMode, corev1.ConfigMapVolumeSourceDefaultMode), optional)
	case v.Secret != nil:
		s, err := cs.CoreV1().Secrets(pod.Namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
		optional := ptr.Deref(v.Secret.Optional, false)
		if apierrors.IsNotFound(err) && optional {
			return os.MkdirAll(target, 0o777)
		}
		if err != nil {
			return fmt.Errorf("secret %q: %w", v.Secret.SecretName, err)
		}
		return project(target, s.Data, v.Secret.Items, ptr.Deref(v.Secret.DefaultMode, corev1.SecretVolumeSourceDefaultMode), optional)
	}
	return fmt.Errorf("volume %q is of a type TerraformJob does not play", v.Name)
}

// isServiceAccountTokenVolume reports whether v is the kube-api-access volume the ServiceAccount
// admission plugin adds (a projected service account token, kube-root-ca.crt and the namespace).
func isServiceAccountTokenVolume(v corev1.Volume) bool {
	for _, s := range v.Projected.Sources {
		if s.ServiceAccountToken != nil {
			return true
		}
	}
	return false
}

// project writes data (or its items) into target the way the kubelet's AtomicWriter does.
func project(target string, data map[string][]byte, items []corev1.KeyToPath, mode int32, optional bool) error {
	payload := map[string][]byte{}
	modes := map[string]int32{}
	if len(items) == 0 {
		for k, v := range data {
			payload[k], modes[k] = v, mode
		}
	} else {
		for _, it := range items {
			v, ok := data[it.Key]
			if !ok {
				if optional {
					continue
				}
				return fmt.Errorf("references non-existent key: %s", it.Key)
			}
			payload[it.Path], modes[it.Path] = v, ptr.Deref(it.Mode, mode)
		}
	}
	if err := os.MkdirAll(target, 0o755); err != nil {
		return err
	}
	tsDir, err := os.MkdirTemp(target, time.Now().UTC().Format("..2006_01_02_15_04_05."))
	if err != nil {
		return err
	}
	for p, v := range payload {
		f := filepath.Join(tsDir, p)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(f, v, os.FileMode(modes[p])); err != nil {
			return err
		}
		if err := os.Chmod(f, os.FileMode(modes[p])); err != nil {
			return err
		}
	}
	if err := os.Symlink(filepath.Base(tsDir), filepath.Join(target, "..data")); err != nil {
		return err
	}
	linked := map[string]bool{}
	for p := range payload {
		top, _, _ := strings.Cut(p, "/")
		if linked[top] {
			continue
		}
		linked[top] = true
		if err := os.Symlink(filepath.Join("..data", top), filepath.Join(target, top)); err != nil {
			return err
		}
	}
	return nil
}

// writeServiceAccountKubeconfig writes a kubeconfig holding a token of pod's ServiceAccount,
// bound to the Pod, as the kubelet would project it.
func (a *TerraformJob) writeServiceAccountKubeconfig(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, path string) error {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	tr, err := cs.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To[int64](tokenExpirationSeconds),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("failed to request a token of ServiceAccount %s/%s: %w", pod.Namespace, sa, err)
	}
	ca := a.Backend.CAData
	if len(ca) == 0 && a.Backend.CAFile != "" {
		if ca, err = os.ReadFile(a.Backend.CAFile); err != nil {
			return err
		}
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["backend"] = &clientcmdapi.Cluster{Server: a.Backend.Host, CertificateAuthorityData: ca, TLSServerName: a.Backend.ServerName, InsecureSkipTLSVerify: a.Backend.Insecure}
	cfg.AuthInfos["pod"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["pod"] = &clientcmdapi.Context{Cluster: "backend", AuthInfo: "pod", Namespace: pod.Namespace}
	cfg.CurrentContext = "pod"
	return clientcmd.WriteToFile(*cfg, path)
}

// containerEnv is c's environment as the kubelet builds it (pkg/kubelet/kubelet_pods.go,
// makeEnvironmentVariables), paths under mounts mapped, the actor's Env on top.
func (a *TerraformJob) containerEnv(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, c corev1.Container, mounts map[string]string) (map[string]string, error) {
	env := map[string]string{}
	for _, from := range c.EnvFrom {
		var data map[string]string
		switch {
		case from.ConfigMapRef != nil:
			cm, err := cs.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, from.ConfigMapRef.Name, metav1.GetOptions{})
			if err != nil && !(apierrors.IsNotFound(err) && ptr.Deref(from.ConfigMapRef.Optional, false)) {
				return nil, err
			}
			if cm != nil {
				data = cm.Data
			}
		case from.SecretRef != nil:
			s, err := cs.CoreV1().Secrets(pod.Namespace).Get(ctx, from.SecretRef.Name, metav1.GetOptions{})
			if err != nil && !(apierrors.IsNotFound(err) && ptr.Deref(from.SecretRef.Optional, false)) {
				return nil, err
			}
			if s != nil {
				data = map[string]string{}
				for k, v := range s.Data {
					data[k] = string(v)
				}
			}
		}
		for k, v := range data {
			env[from.Prefix+k] = v
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env[e.Name] = expandEnv(e.Value, env)
			continue
		}
		v, err := valueFrom(ctx, cs, pod, e.ValueFrom)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		env[e.Name] = v
	}
	for k, v := range env {
		if p, ok := mapPath(v, mounts); ok {
			env[k] = p
		}
	}
	maps.Copy(env, a.Env)
	if a.ModulesDir != "" {
		env["PROVISION_MODULES_DIR"] = a.ModulesDir
	}
	return env, nil
}

// valueFrom resolves an env var's valueFrom.
func valueFrom(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, from *corev1.EnvVarSource) (string, error) {
	switch {
	case from.FieldRef != nil:
		p := from.FieldRef.FieldPath
		switch {
		case p == "metadata.name":
			return pod.Name, nil
		case p == "metadata.namespace":
			return pod.Namespace, nil
		case p == "metadata.uid":
			return string(pod.UID), nil
		case p == "spec.serviceAccountName":
			return pod.Spec.ServiceAccountName, nil
		case p == "spec.nodeName":
			return pod.Spec.NodeName, nil
		case strings.HasPrefix(p, "metadata.labels['") && strings.HasSuffix(p, "']"):
			return pod.Labels[strings.TrimSuffix(strings.TrimPrefix(p, "metadata.labels['"), "']")], nil
		case strings.HasPrefix(p, "metadata.annotations['") && strings.HasSuffix(p, "']"):
			return pod.Annotations[strings.TrimSuffix(strings.TrimPrefix(p, "metadata.annotations['"), "']")], nil
		}
		return "", fmt.Errorf("fieldRef %s is not played", p)
	case from.SecretKeyRef != nil:
		s, err := cs.CoreV1().Secrets(pod.Namespace).Get(ctx, from.SecretKeyRef.Name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		v, ok := s.Data[from.SecretKeyRef.Key]
		if !ok && !ptr.Deref(from.SecretKeyRef.Optional, false) {
			return "", fmt.Errorf("secret %s has no key %s", from.SecretKeyRef.Name, from.SecretKeyRef.Key)
		}
		return string(v), nil
	case from.ConfigMapKeyRef != nil:
		cm, err := cs.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, from.ConfigMapKeyRef.Name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		v, ok := cm.Data[from.ConfigMapKeyRef.Key]
		if !ok && !ptr.Deref(from.ConfigMapKeyRef.Optional, false) {
			return "", fmt.Errorf("configmap %s has no key %s", from.ConfigMapKeyRef.Name, from.ConfigMapKeyRef.Key)
		}
		return v, nil
	}
	return "", errors.New("valueFrom source is not played")
}

// expandEnv replaces $(NAME) with env[NAME] when defined, and $$ with $, as the kubelet expands
// env values (third_party/forked/golang/expansion).
func expandEnv(s string, env map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := env[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
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

func environ(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// updateJobStatus applies mutate to the current Job's status and writes it (retrying conflicts).
func (a *TerraformJob) updateJobStatus(ctx context.Context, cs kubernetes.Interface, job *batchv1.Job, mutate func(*batchv1.JobStatus)) error {
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
func updatePodStatus(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, mutate func(*corev1.PodStatus)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mutate(&cur.Status)
		_, err = cs.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
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
	for _, t := range []batchv1.JobConditionType{batchv1.JobComplete, batchv1.JobFailed} {
		if c := jobCondition(job, t); c != nil && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func jobCondition(job *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range job.Status.Conditions {
		if job.Status.Conditions[i].Type == t {
			return &job.Status.Conditions[i]
		}
	}
	return nil
}

// jobCondition2 is newCondition(t, True, reason, message, now).
func jobCondition2(t batchv1.JobConditionType, reason, message string) *batchv1.JobCondition {
	now := metav1.Now()
	return &batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now, Reason: reason, Message: message}
}

// ensureJobCondition is the Job controller's ensureJobConditionStatus: an existing condition is
// replaced when it differs; a missing one is added unless its status is False.
func ensureJobCondition(list []batchv1.JobCondition, t batchv1.JobConditionType, status corev1.ConditionStatus, reason, message string) []batchv1.JobCondition {
	now := metav1.Now()
	c := batchv1.JobCondition{Type: t, Status: status, LastProbeTime: now, LastTransitionTime: now, Reason: reason, Message: message}
	for i := range list {
		if list[i].Type == t {
			if list[i].Status != status || list[i].Reason != reason || list[i].Message != message {
				list[i] = c
			}
			return list
		}
	}
	if status != corev1.ConditionFalse {
		list = append(list, c)
	}
	return list
}

// setPodCondition sets condition t of a Pod's status.
func setPodCondition(list []corev1.PodCondition, t corev1.PodConditionType, status corev1.ConditionStatus, reason string) []corev1.PodCondition {
	c := corev1.PodCondition{Type: t, Status: status, Reason: reason, LastTransitionTime: metav1.Now()}
	for i := range list {
		if list[i].Type == t {
			list[i] = c
			return list
		}
	}
	return append(list, c)
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

func (l *lockedBuffer) printf(format string, args ...any) {
	_, _ = fmt.Fprintf(l, format, args...)
}
