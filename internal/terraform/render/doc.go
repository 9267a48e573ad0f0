// Package render generates the Terraform root module of one provisioning run
// (docs/provisioner.md#rendered-module) from a provisioner request.
//
// Module returns the root module's files by name (main.tf, backend.tf, versions.tf, outputs.tf),
// which the provisioner stores in the run's ConfigMap. The root module calls the project's own
// modules (terraform/modules: vpc, security, compute, eks) as ./modules/<name>: the runner puts
// terraform/modules next to the rendered files as modules/.
//
//   - vanilla_kubeadm: provider aws; modules vpc, security and compute with
//     enable_self_bootstrap_control_plane = true; the SSM parameters join_token, ca_cert_hash,
//     k8s_certificate_key and admin_kubeconfig under /kubeopera/<fp>/<clusterID>/, seeded
//     PENDING and left to the nodes (lifecycle ignore_changes on value). With more than one
//     control-plane node also an internet-facing Network Load Balancer on 6443 (aws_lb.k8s_api,
//     its target group, listener and one attachment per control-plane node), whose DNS name is
//     compute's control_plane_endpoint_override. Outputs admin_kubeconfig_parameter (what the
//     runner polls), control_plane_endpoint, vpc_id.
//   - eks: modules vpc and eks. Outputs cluster_name, cluster_endpoint, cluster_ca_certificate,
//     vpc_id.
//
// backend.tf keeps the state in S3 bucket kubeopera-terraform-state-<terraformEnvironment>-<fp>,
// key <fp>/<clusterID>/terraform.tfstate, with S3-native locking (use_lockfile, Terraform >= 1.10;
// GA in 1.11) and encryption. <fp> is the workspace fingerprint the request carries: every
// cloud-side name (the bucket and key, the SSM path, the VPC's, security groups', instances',
// IAM roles', load balancer's and EKS cluster's names) is api.NamesOf's, so two workspaces that
// chose the same clusterID and terraformEnvironment share nothing in AWS. Everything is tagged
// kubeopera.io/cluster-id and kubeopera.io/workspace-fingerprint (provider default_tags and the
// modules' tags).
//
// The files are built with hclwrite only: request values enter as cty string and number values,
// which hclwrite writes as quoted literals (a "${" in a value is written "$${", a quote \"), and
// references are traversals built from fixed names. Module validates the request first
// (api.CreateRequest.Validate), so no value with such characters gets this far anyway.
//
// What is verified, and how (the package's tests):
//   - Golden files for vanilla_kubeadm with one and with three control-plane nodes and for eks
//     (go test ./internal/terraform/render -update rewrites them).
//   - Every rendered file and every .tf file in terraform/modules parses (hclparse), and
//     ParseAndCheck checks the rendered module's structure: only the block types, resource types
//     and attributes the renderer emits, module sources under ./modules/, every reference naming
//     something declared.
//   - An offline "type check" against terraform/modules: each module call passes exactly the
//     variables the module declares (required ones present, no unknown ones), literal arguments
//     convert to the variables' types, and every module.X.Y names a declared output. Inside the
//     modules, every var./local./resource/data reference is declared, and every templatefile call
//     passes each variable its template uses; the rendered bootstrap scripts pass bash -n and stay
//     under EC2's 16 KB user-data limit.
//   - terraform fmt -check over the modules and the rendered module, with the terraform binary
//     when it is on PATH. terraform init/validate run only when init succeeds, which needs the
//     hashicorp/aws provider from a registry or a local mirror; offline they are skipped, so the
//     AWS provider's resource schemas (argument names and types of aws_* resources) are checked
//     only by hand against the provider's documentation, not by a tool. Nothing here plans or
//     applies against AWS, and the bootstrap scripts are not run.
package render
