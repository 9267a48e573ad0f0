package otc

import (
	"encoding/base64"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
)

// observedCluster is a ClusterV3 whose status.atProvider holds the certificateClusters entries
// given (name -> server, CA) and one user, as the provider observes them (base64 PEM).
func observedCluster(entries ...[3]string) *unstructured.Unstructured {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	var clusters []any
	for _, e := range entries {
		m := map[string]any{"name": e[0], "server": e[1]}
		if e[2] != "" {
			m["certificateAuthorityData"] = b64(e[2])
		}
		clusters = append(clusters, m)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"atProvider": map[string]any{
		"certificateClusters": clusters,
		"certificateUsers":    []any{map[string]any{"name": "user", "clientCertificateData": b64("CERT"), "clientKeyData": b64("KEY")}},
	}}}}
	u.SetGroupVersionKind(ClusterGVK)
	u.SetName("kc-web-cluster")
	return u
}

func TestKubeconfigChoosesTheEndpoint(t *testing.T) {
	internal := [3]string{CertificateClusterInternal, "https://192.168.0.23:5443", "CA"}
	insecure := [3]string{CertificateClusterExternal, "https://80.158.1.2:5443", ""}
	verify := [3]string{CertificateClusterExternalTLSVerify, "https://80.158.1.2:5443", "CA"}
	cases := map[string]struct {
		reason      string
		cluster     *unstructured.Unstructured
		public      bool
		wantServer  string
		wantWaiting string
	}{
		"PrivateCluster": {
			reason:  "Without an EIP CCE reports internalCluster only; a private cluster's kubeconfig names it.",
			cluster: observedCluster(internal), wantServer: "https://192.168.0.23:5443",
		},
		"PublicCluster": {
			reason:  "With an EIP bound, a public cluster's kubeconfig names the verifying external entry, wherever it is in the list.",
			cluster: observedCluster(internal, insecure, verify), public: true, wantServer: "https://80.158.1.2:5443",
		},
		"PrivateAskedOfAPublicCluster": {
			reason:  "A cluster not asked to be public gets its private endpoint even when CCE reports external entries.",
			cluster: observedCluster(insecure, verify, internal), wantServer: "https://192.168.0.23:5443",
		},
		"PublicWithoutExternalEntryWaits": {
			reason:  "A cluster asked to be public whose EIP is not bound yet waits; the private entry is not delivered in its place.",
			cluster: observedCluster(internal), public: true, wantWaiting: "reports no public endpoint yet",
		},
		"PublicNeverTheInsecureEntry": {
			reason:  "externalCluster skips server verification: it is never used, even when it is the only external entry.",
			cluster: observedCluster(internal, insecure), public: true, wantWaiting: "no externalClusterTLSVerify entry",
		},
		"NothingObservedYet": {
			reason:  "Before the provider observed the certificates there is nothing to build.",
			cluster: observedCluster(), wantWaiting: "has not observed its certificates yet",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			raw, ep, waiting, err := Kubeconfig(tc.cluster, tc.public)
			if err != nil {
				t.Fatalf("%s\nerror: %v", tc.reason, err)
			}
			if tc.wantWaiting != "" {
				if raw != nil || !strings.Contains(waiting, tc.wantWaiting) {
					t.Fatalf("%s\ngot kubeconfig %v, waiting %q; want waiting %q", tc.reason, raw != nil, waiting, tc.wantWaiting)
				}
				return
			}
			if waiting != "" {
				t.Fatalf("%s\nwaiting %q", tc.reason, waiting)
			}
			if ep.Server != tc.wantServer || ep.Public != tc.public {
				t.Errorf("%s\nendpoint %+v, want %s public=%v", tc.reason, ep, tc.wantServer, tc.public)
			}
			cfg, err := clientcmd.Load(raw)
			if err != nil {
				t.Fatal(err)
			}
			c := cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster]
			if c.Server != tc.wantServer || string(c.CertificateAuthorityData) != "CA" || c.InsecureSkipTLSVerify {
				t.Errorf("%s\nkubeconfig cluster: server %q, CA %q, insecure %v", tc.reason, c.Server, c.CertificateAuthorityData, c.InsecureSkipTLSVerify)
			}
			u := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo]
			if string(u.ClientCertificateData) != "CERT" || string(u.ClientKeyData) != "KEY" {
				t.Errorf("%s\nkubeconfig user lacks the client certificate and key", tc.reason)
			}
		})
	}
}

func TestObserveNodePool(t *testing.T) {
	// The message upjet's async apply callback writes after the Terraform create's wait ended on
	// SoldOut (see nodepool.go for where each part comes from).
	const soldOut = "apply failed: error creating Open Telekom Cloud CCE Node Pool: unexpected state 'SoldOut', wanted target ''. last error: %!s(<nil>): "
	pool := func(atProviderStatus string, conds ...map[string]any) *unstructured.Unstructured {
		var cs []any
		for _, c := range conds {
			cs = append(cs, c)
		}
		u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": cs}}}
		if atProviderStatus != "-" {
			_ = unstructured.SetNestedField(u.Object, atProviderStatus, "status", "atProvider", "status")
		}
		return u
	}
	cond := func(typ, status, reason, msg string) map[string]any {
		return map[string]any{"type": typ, "status": status, "reason": reason, "message": msg}
	}
	cases := map[string]struct {
		reason string
		pool   *unstructured.Unstructured
		want   NodePoolState
	}{
		"Healthy": {
			reason: "A pool created as asked: LastAsyncOperation True, status empty.",
			pool:   pool("", cond("Ready", "True", "Available", ""), cond("LastAsyncOperation", "True", "Success", "")),
		},
		"CreateFailedSoldOutJustNow": {
			reason: "Right after the failed apply: no atProvider yet, Synced False, LastAsyncOperation False with the provider's text.",
			pool: pool("-", cond("Synced", "False", "ReconcileError", "create failed: "+soldOut),
				cond("LastAsyncOperation", "False", "ApplyFailure", soldOut)),
			want: NodePoolState{CreateFailed: true, SoldOut: true, Reason: "ApplyFailure", Message: soldOut},
		},
		"CreateFailedSoldOutRefreshed": {
			reason: "After upjet refreshed the tainted pool: Ready True, status SoldOut, LastAsyncOperation still False.",
			pool: pool("SoldOut", cond("Ready", "True", "Available", ""), cond("Synced", "True", "ReconcileSuccess", ""),
				cond("LastAsyncOperation", "False", "ApplyFailure", soldOut)),
			want: NodePoolState{CreateFailed: true, SoldOut: true, Reason: "ApplyFailure", Message: soldOut},
		},
		"CreateFailedOtherwise": {
			reason: "A create whose wait ended on another phase is a failed create, not SoldOut.",
			pool: pool("-", cond("LastAsyncOperation", "False", "ApplyFailure",
				"apply failed: error creating Open Telekom Cloud CCE Node Pool: unexpected state 'Error', wanted target ''. last error: %!s(<nil>): ")),
			want: NodePoolState{CreateFailed: true, Reason: "ApplyFailure",
				Message: "apply failed: error creating Open Telekom Cloud CCE Node Pool: unexpected state 'Error', wanted target ''. last error: %!s(<nil>): "},
		},
		"SoldOutStatusOnly": {
			reason: "A pool CCE reports SoldOut after it was created (status only) is SoldOut, not a failed create.",
			pool:   pool("SoldOut", cond("LastAsyncOperation", "True", "Success", "")),
			want:   NodePoolState{SoldOut: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := ObserveNodePool(tc.pool); got != tc.want {
				t.Errorf("%s\ngot %+v\nwant %+v", tc.reason, got, tc.want)
			}
		})
	}
}
