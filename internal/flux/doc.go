// Package flux bootstraps Flux on a target cluster and points it at a git repository: it installs
// (or adopts) Flux's controllers in namespace flux-system with the Helm SDK, reports their health,
// seeds the git credentials Secret and writes the GitRepository and Kustomization `flux-system`
// exactly as `flux bootstrap` names them. It has no reconcile loop; the HostCluster controller
// calls it.
package flux
