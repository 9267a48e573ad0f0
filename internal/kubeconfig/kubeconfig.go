// Package kubeconfig reads and rewrites kubeconfig files without ever logging their content.
package kubeconfig

import (
	"fmt"

	"k8s.io/client-go/tools/clientcmd"
)

// RewriteServer parses raw and points every cluster entry at server. It is used for vCluster
// kubeconfigs, which are rewritten to the vCluster Service's in-cluster short-DNS address.
func RewriteServer(raw []byte, server string) ([]byte, error) {
	cfg, err := clientcmd.Load(raw)
	if err != nil {
		// The parse error may quote the input; keep it out of the message.
		return nil, fmt.Errorf("kubeconfig is not valid")
	}
	if len(cfg.Clusters) == 0 {
		return nil, fmt.Errorf("kubeconfig has no clusters")
	}
	for _, c := range cfg.Clusters {
		c.Server = server
	}
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to serialise kubeconfig: %w", err)
	}
	return out, nil
}
