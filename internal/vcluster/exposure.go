package vcluster

import (
	"fmt"
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ExposureMode is how a Tenant's vCluster is reached from outside the backend cluster: where the
// tenant sits (their laptop, their CI), the in-cluster Service name means nothing.
type ExposureMode string

const (
	// ExposeNone: the vCluster is reached only inside the backend, at its Service's in-cluster
	// name https://vc-<tenantName>.kcp-<fp>-vc-<tenantName>:443. The delivered kubeconfig names
	// that; it works from Pods on the backend, not from a laptop.
	ExposeNone ExposureMode = "none"
	// ExposeLoadBalancer: the vCluster's Service is of type LoadBalancer; the backend's load
	// balancer controller gives it an address (status.loadBalancer.ingress), which vCluster adds
	// to its serving certificate by itself (vCluster v0.21.0 pkg/server/cert/syncer.go lines
	// 116-127 and 154-174: every ingress IP and hostname of its Service is a SAN, read again every
	// 2 s, Run) and which the delivered kubeconfig names.
	ExposeLoadBalancer ExposureMode = "loadbalancer"
	// ExposeIngress: the chart's control-plane Ingress with TLS passthrough (ingress-nginx's
	// ssl-passthrough annotations, the chart's defaults: chart/values.yaml
	// controlPlane.ingress.annotations) on host <tenantName>-<fp>.<domain> of the platform's
	// domain, which is a SAN of the vCluster's certificate (controlPlane.proxy.extraSANs, and
	// vCluster adds the ingress host itself: pkg/server/cert/syncer.go lines 195-197) and the
	// exported server. The platform's DNS has a wildcard record *.<domain> to the ingress
	// controller.
	ExposeIngress ExposureMode = "ingress"
)

// ExposureModes are the modes an admin may choose, in the order the flag's help names them.
var ExposureModes = []ExposureMode{ExposeNone, ExposeLoadBalancer, ExposeIngress}

// DefaultControlPlaneIngressClass is the ingress class of the control-plane Ingresses: the chart's
// annotations are ingress-nginx's, and ingress-nginx serves class "nginx" by default.
const DefaultControlPlaneIngressClass = "nginx"

// Exposure is the platform admin's choice of how vClusters are reached from outside.
type Exposure struct {
	// Mode is none, loadbalancer or ingress.
	Mode ExposureMode
	// Domain is the platform domain of ExposeIngress: each vCluster is <tenantName>-<fp>.<Domain>.
	Domain string
	// IngressClass is the class of the control-plane Ingresses (ExposeIngress); an ingress
	// controller of that class must run with TLS passthrough enabled (ingress-nginx:
	// --enable-ssl-passthrough).
	IngressClass string
}

// Validate says what is wrong with the admin's choice, naming the flag.
func (e Exposure) Validate() error {
	switch e.Mode {
	case ExposeNone, ExposeLoadBalancer:
		return nil
	case ExposeIngress:
		if e.Domain == "" {
			return fmt.Errorf("--vcluster-exposure=ingress needs --vcluster-domain (the platform domain whose wildcard record points at the ingress controller)")
		}
		if errs := validation.IsDNS1123Subdomain(e.Domain); len(errs) > 0 {
			return fmt.Errorf("--vcluster-domain %q is not a DNS name: %s", e.Domain, strings.Join(errs, "; "))
		}
		// The longest host: a 32-character tenantName, '-', 12 hex characters, '.'.
		if len(e.Domain) > validation.DNS1123SubdomainMaxLength-46 {
			return fmt.Errorf("--vcluster-domain %q is too long: %d characters at most, so every <tenantName>-<fingerprint>.<domain> is a DNS name", e.Domain, validation.DNS1123SubdomainMaxLength-46)
		}
		if errs := validation.IsDNS1123Subdomain(e.IngressClass); e.IngressClass == "" || len(errs) > 0 {
			return fmt.Errorf("--vcluster-control-plane-ingress-class %q is not an ingress class name", e.IngressClass)
		}
		return nil
	default:
		return fmt.Errorf("--vcluster-exposure %q is not one of %v", e.Mode, ExposureModes)
	}
}

// Host is the external host name of a vCluster with ExposeIngress: <tenantName>-<fp>.<domain>.
// The fingerprint keeps two workspaces' same-named tenants apart; tenantName (at most 32
// characters of [a-z0-9-]) keeps it one DNS label.
func (e Exposure) Host(tenantName, fingerprint string) string {
	return tenantName + "-" + fingerprint + "." + e.Domain
}

// InClusterServer is the server of a vCluster inside the backend: its Service's short-DNS name,
// which the vCluster's certificate covers (pkg/server/cert/syncer.go lines 99-102).
func InClusterServer(release, namespace string) string {
	return "https://" + release + "." + namespace + ":443"
}

// IngressServer is the server of a vCluster reached through its control-plane Ingress.
func IngressServer(host string) string { return "https://" + host + ":443" }

// LoadBalancerServer is the server of a vCluster behind its LoadBalancer Service, from the
// Service's status: the first ingress point's hostname, else its IP (the order `vcluster
// connect` takes them in, pkg/cli/connect_helm.go lines 494-498). Empty while the load balancer
// controller has not given it an address.
func LoadBalancerServer(svc *corev1.Service) string {
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		switch {
		case ing.Hostname != "":
			return "https://" + net.JoinHostPort(ing.Hostname, "443")
		case ing.IP != "":
			return "https://" + net.JoinHostPort(ing.IP, "443")
		}
	}
	return ""
}

// IngressAdmitted says whether an ingress controller has taken the Ingress: it publishes its
// address in status.loadBalancer.ingress (ingress-nginx: internal/ingress/status/status.go,
// updateStatus, from --publish-service or its nodes).
func IngressAdmitted(ing *networkingv1.Ingress) bool {
	for _, p := range ing.Status.LoadBalancer.Ingress {
		if p.IP != "" || p.Hostname != "" {
			return true
		}
	}
	return false
}

// values are the chart values of the exposure: the Service type, the control-plane Ingress, the
// extra SANs and the exported server.
func (e Exposure) values(release, namespace, host string) map[string]any {
	controlPlane := map[string]any{}
	server := InClusterServer(release, namespace)
	switch e.Mode {
	case ExposeLoadBalancer:
		// chart/templates/service.yaml renders controlPlane.service.spec as the Service's spec.
		// The exported server stays the in-cluster one: the address is known only once the
		// load balancer controller has given one, and the Tenant controller writes it into the
		// delivered kubeconfig then.
		controlPlane["service"] = map[string]any{"spec": map[string]any{"type": string(corev1.ServiceTypeLoadBalancer)}}
	case ExposeIngress:
		// chart/templates/ingress.yaml: one rule, host controlPlane.ingress.host, to the Service's
		// https port; the chart's default annotations are ingress-nginx's TLS passthrough.
		controlPlane["ingress"] = map[string]any{
			"enabled":  true,
			"host":     host,
			"pathType": "ImplementationSpecific",
			"spec":     map[string]any{"ingressClassName": e.IngressClass, "tls": []any{}},
		}
		controlPlane["proxy"] = map[string]any{"extraSANs": []any{host}}
		server = IngressServer(host)
	}
	return map[string]any{
		"controlPlane": controlPlane,
		// vCluster always writes Secret vc-<release> (key "config") with this server
		// (pkg/setup/controllers.go lines 213-228). The seed's exportKubeConfig.enabled is not a
		// key of the 0.21 chart's schema, which refuses unknown keys.
		"exportKubeConfig": map[string]any{"server": server},
	}
}
