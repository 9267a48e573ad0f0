// Package jobs keeps the gitops-scaffolder's runs as Kubernetes objects in the jobs namespace
// (default kubeopera-provisioning, next to the provisioner's; docs/scaffolder.md#runs). There is
// no database: a scaffold IS its Job scaffold-<id> and the objects the Job owns, and every read
// is computed from them (sync-on-read). The pieces shared with the provisioner (IDs, launching a
// suspended Job, outcomes, pod problems, the sweep, security contexts) are internal/jobrun's.
//
// Create reads each Secret the request names once, as the scaffolder (the manager grants it get
// on exactly those Secrets, by name), and makes, per run:
//
//	Job            scaffold-<id>          the runner, created suspended and owner of the rest
//	ServiceAccount scaffold-<id>-runner   the run's own identity
//	Role+Binding   scaffold-<id>-runner   get, update on Secret scaffold-<id>-status only
//	Secret         scaffold-<id>-inputs   the known keys of the named Secrets (immutable), mounted
//	                                      read-only at InputsMountPath (api.InputKubeconfig, ...)
//	Secret         scaffold-<id>-status   empty; the runner reports its step, message and commits
//	                                      there (api.AnnotationStep, AnnotationMessage,
//	                                      AnnotationCommits)
//
// then un-suspends the Job, so no pod starts before everything it mounts exists. Every object
// carries the run's labels (api.LabelRun, LabelCluster, LabelOwnerUID, managed-by) and an
// ownerReference to the Job: deleting the Job (Sweep does, with Background propagation)
// garbage-collects the run. The Job also carries api.AnnotationWorkspace and AnnotationClusterID,
// so every answer says whose scaffold it is (api.Scaffold.BelongsTo).
//
// Get maps the Job's conditions, the status Secret's annotations and, when they say too little,
// the pod's status to an api.Scaffold.
package jobs
