// Package jobs keeps the provisioner's runs as Kubernetes objects in the jobs namespace (default
// kubeopera-provisioning; docs/provisioner.md#runs). There is no
// database: a run IS its Job provision-<id> and the objects the Job owns, and every read is
// computed from them (sync-on-read).
//
// Create makes, per run:
//
//	Job            provision-<id>              the runner, created suspended and owner of the rest
//	ServiceAccount provision-<id>-runner       the run's own identity
//	Role+Binding   provision-<id>-runner       get, update on Secret provision-<id>-outputs only
//	Secret         provision-<id>-credentials  a copy of the caller's credential (known keys only)
//	ConfigMap      provision-<id>-module       the rendered Terraform root module
//	Secret         provision-<id>-outputs      empty; the runner reports progress (annotations)
//	                                           and publishes the kubeconfig there
//
// then un-suspends the Job, so no pod starts before everything it mounts exists. Before the owned
// objects, the new run takes its cluster's Lease provision-lock-<hash> (lock.go): one run at a
// time per cluster (workspace fingerprint and clusterID, one Terraform state); while another run
// of the cluster has not ended, Create deletes the suspended Job and returns *ActiveRunError. Every object
// carries the run's labels (api.LabelRun, LabelCluster, LabelOperation, and whose run it is:
// LabelWorkspaceFingerprint, LabelOwnerUID; the Job also AnnotationWorkspace) and an
// ownerReference to the Job: deleting the Job (Sweep does, with Background propagation)
// garbage-collects the run. Every answer about a run carries whose it is, so a caller never
// mistakes another object's run for its own (api.Provision.BelongsTo).
//
// Get maps the Job's conditions and the outputs Secret's annotations to an api.Provision; Logs
// streams the Job's pod's log; Kubeconfig reads the outputs Secret once the run has succeeded.
package jobs
