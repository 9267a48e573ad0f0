// Package jobrun is what the platform's job services (the provisioner, docs/provisioner.md#runs,
// and the gitops-scaffolder, docs/scaffolder.md#runs) share about keeping a run as a Kubernetes
// Job: run IDs, the run's own identity (a ServiceAccount allowed get and update on one Secret),
// restricted Pod Security contexts, the owner reference every run object carries, creating a
// Job suspended and starting it once everything it mounts exists, reading a Job's outcome from
// its conditions, why its pod does not run, deleting a Job with a UID precondition, and the
// retention sweep over a service's labelled Jobs.
//
// Each service keeps its own names, labels, statuses and contract (internal/provisioner/api,
// internal/scaffolder/api); nothing here knows either.
package jobrun
