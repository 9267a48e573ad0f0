// Package runner is what cmd/terraform-runner does inside a provisioning run's Job (docs/provisioner.md#terraform-runner):
//
//  1. report phase planning on the run's outputs Secret (annotations api.AnnotationPhase and
//     api.AnnotationMessage; the run's identity may only get and update that one Secret);
//  2. build an aws.Config from the mounted credential (static keys, and with role_arn the
//     temporary credentials of sts:AssumeRole with the credential's external id);
//  3. ensure the S3 state bucket (idempotent: create when missing, then versioning, default
//     encryption and a full public access block);
//  4. copy the rendered root module into a writable work dir beside the project's modules/;
//  5. terraform init, plan (to a saved plan), then phase applying and apply of that plan (a
//     destroy plan for operation destroy), through terraform-exec with the AWS credentials in
//     Terraform's environment only;
//  6. the kubeconfig: vanilla_kubeadm polls the SSM parameter the control-plane node publishes
//     its base64 admin.conf to (phase waiting-for-kubeconfig); eks builds one from the cluster's
//     outputs whose exec plugin is /eks-token-helper, with the credential embedded at
//     construction (never through Terraform state). Both come from the tenant's account, so
//     both are checked as the manager checks them (kubeconfig.ParseUntrusted, ParseEKS) before
//     anything is published;
//  7. publish: data kubeconfig and phase succeeded (destroy: succeeded without a kubeconfig).
//
// A plan run (operation plan, approvePlan manual) stops after step 5's plan: it summarizes the
// plan (terraform show -json, never logged; Summarize), saves the plan file in the state bucket
// next to the state (api.EnvPlanKey, SavePlan) and reports succeeded with the summary
// (api.AnnotationPlan). An apply run with api.EnvPlanKey set applies that saved plan (LoadPlan)
// instead of planning: exactly what was approved, which Terraform refuses when the state changed
// since the plan was made.
//
// Any failure is phase failed with the failing step's error (Terraform's own text for a
// Terraform failure), trimmed and with every credential scrubbed, and a non-zero exit. A run
// repeated by the Job controller converges: every step is idempotent and the state lives in S3.
//
// The runner is configured only by its environment (api.Env* and the Env* constants here) and
// the files in the mounted directories.
package runner
