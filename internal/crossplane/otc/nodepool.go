package otc

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// How a NodePoolV3 whose create failed looks, as provider-opentelekomcloud (d711db8, upjet
// v2.1.0 with the Terraform CLI: its controllers use tjcontroller.NewConnector with a workspace
// store, internal/controller/namespaced/cce/nodepoolv3/zz_controller.go, and the node pool is
// UseAsync, config/namespaced/cce/config.go line 98) and the Terraform resource
// opentelekomcloud_cce_node_pool_v3 (terraform-provider-opentelekomcloud 88f1cf1e,
// opentelekomcloud/services/cce/) leave it:
//
//   - The Terraform create (resource_opentelekomcloud_cce_node_pool_v3.go,
//     resourceCCENodePoolV3Create) creates the pool, sets its id, then waits with Pending
//     [Synchronizing, Synchronized] and Target [""]; any other phase CCE reports, SoldOut among
//     them, ends the wait with terraform-plugin-sdk's UnexpectedStateError ("unexpected state
//     '%s', wanted target '%s'. last error: %s", helper/retry/error.go) wrapped in the resource's
//     createError ("error creating Open Telekom Cloud CCE Node Pool: %w").
//   - upjet's async apply turns the failed `terraform apply -json` into "apply failed: " and the
//     error diagnostics as "<summary>: <detail>" (pkg/terraform/workspace.go ApplyAsync,
//     pkg/terraform/errors/errors.go newTFError); its callback sets LastAsyncOperation False
//     with that message (reason ApplyFailure, pkg/resource/conditions.go) and Synced False
//     ReconcileError "create failed: <message>" (pkg/controller/api.go callbackFn).
//   - The pool exists in CCE and Terraform keeps it in its state (tainted: the create returned an
//     error after setting the id; hashicorp/terraform node_resource_apply_instance.go
//     maybeTainted). upjet's next Observe refreshes it, so the external name and
//     status.atProvider follow, with status as CCE's phase (the Read sets "status" to
//     Status.Phase): SoldOut. It then marks the resource Available and, as terraform plan
//     counts the tainted pool's replacement as an add, not a change, finds it up to date for good:
//     Ready and Synced turn True while LastAsyncOperation stays False (terraform plans the tainted
//     pool as a replace, internal/command/views/operation.go counts it as add and remove;
//     upjet's UpToDate is "no change", pkg/terraform/workspace.go Plan). The provider never
//     retries the create; only deleting the NodePoolV3 and creating it anew does.
//
// So SoldOut shows first in LastAsyncOperation's message and later in status.atProvider.status
// as well, while Ready may say True: both are read, and LastAsyncOperation decides.
const (
	// NodePoolSoldOut is the phase CCE gives a node pool for whose flavor its zone has no
	// capacity.
	NodePoolSoldOut = "SoldOut"
	// nodePoolCreateFailed starts the Terraform resource's create error (its createError).
	nodePoolCreateFailed = "error creating Open Telekom Cloud CCE Node Pool: "
	// nodePoolSoldOutState is how terraform-plugin-sdk's UnexpectedStateError names the SoldOut
	// phase the create's wait ended on.
	nodePoolSoldOutState = "unexpected state '" + NodePoolSoldOut + "'"
	// typeLastAsyncOperation is upjet's condition of its last asynchronous Terraform operation.
	typeLastAsyncOperation = "LastAsyncOperation"
)

// NodePoolState is what a NodePoolV3's status says beyond Crossplane's Ready and Synced.
type NodePoolState struct {
	// CreateFailed: the provider's create of the pool failed (LastAsyncOperation False with the
	// Terraform resource's create error). It is never retried; Ready may still turn True.
	CreateFailed bool
	// SoldOut: CCE reported the pool SoldOut, in the failed operation's error or as
	// status.atProvider.status.
	SoldOut bool
	// Reason and Message are LastAsyncOperation's while it is False.
	Reason, Message string
}

// ObserveNodePool reads u's LastAsyncOperation condition and status.atProvider.status.
func ObserveNodePool(u *unstructured.Unstructured) NodePoolState {
	var st NodePoolState
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] != typeLastAsyncOperation || m["status"] != "False" {
			continue
		}
		st.Reason, _ = m["reason"].(string)
		st.Message, _ = m["message"].(string)
		st.CreateFailed = strings.Contains(st.Message, nodePoolCreateFailed)
		st.SoldOut = strings.Contains(st.Message, nodePoolSoldOutState)
	}
	if phase, _, _ := unstructured.NestedString(u.Object, "status", "atProvider", "status"); strings.EqualFold(phase, NodePoolSoldOut) {
		st.SoldOut = true
	}
	return st
}
