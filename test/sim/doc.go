// Package sim plays what no process here can do (docs/testing.md#actors-one-package-testsim): a
// kubelet running Pods, a Job's container, vCluster writing its kubeconfig, Crossplane and its
// providers reporting resources Ready, AWS answering, an EKS control plane's authenticator,
// authapi's Pod, the external gitops-scaffolder, kubeopera-api's callback endpoint, a chart
// registry that fails, and a tenant's hostile API server. Each actor plays exactly one real
// component's observable behaviour, as that component's source or documentation says (each cites
// it), and nothing more.
//
// It also wires the actors around real servers (StartTarget, StartGitOps; the provisioning side,
// which links the real provisioner, is its subpackage provisioning) for bin/devenv, the e2e
// suite, the bench and the controller suites alike. It imports no controller, so the packages
// whose own tests use it (internal/helm, internal/health, internal/terraform/runner) can. No product package may
// import it: only tests and cmd/devenv, a development binary (TestNoProductPackageImportsSim).
package sim
