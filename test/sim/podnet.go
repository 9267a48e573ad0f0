package sim

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/kubeopera/kubeopera/internal/devenv"
)

// The network of a Pod whose address the target's API server must reach (its service proxy):
// what a CNI plugin sets up for a Pod, here in the manner of the ptp plugin (containernetworking
// Documentation/ptp.md: a veth pair, one end in the container and one on the host; the host
// end's address is the container's gateway), played with iproute2 and util-linux, on this
// machine only.
//
//   - The Pod's own network namespace (unshare --net), held by a sleeping process (the pause
//     container's part), with loopback up.
//   - A veth pair: one end in the root namespace (kp<hex of the
//     address>) holding the gateway address podGateway (/32, the same on every such end), the
//     other the Pod's eth0 with the Pod's address (/32); a host route to the Pod's address
//     through the root end with the gateway as source, and in the Pod a route to the gateway
//     only: the Pod has no default route, so nothing it sends can leave this machine even where
//     the host forwards packets. The address comes
//     from hostPodNetwork, a part of podNetwork no other actor uses; the root namespace's route
//     for it is taken atomically (`ip link add` fails when the name, so the address, is taken by
//     another test on the machine), and the pair goes with the namespace when the sandbox ends.
//   - Inside the namespace, the target API server's address (a loopback address of the root
//     namespace) is a forwarder to it, as for VClusterPods, so the Pod reaches the API server
//     at the address its kubeconfig or KUBERNETES_SERVICE_HOST names.
//
// Nothing here is routed off the machine: the address exists only as that route and the Pod's
// eth0. An Endpoints (or EndpointSlice) address may not be loopback, link-local or unspecified
// (k8s.io/kubernetes v1.36.3 pkg/apis/core/validation/validation.go ValidateEndpointIP, lines
// 8423-8443), and the service proxy only takes an address that is its Pod's status.podIPs
// (pkg/registry/core/service/storage/storage.go isValidAddress, lines 496-520): so the Pod needs
// an address of a pod network, not 127.0.0.1. Needs root (network namespaces, links, routes).

// hostPodNetwork is where the addresses of the Pods of FluxPods come from: the upper half of
// podNetwork (VClusterPods hands out podIP from the bottom of it, inside namespaces only).
const (
	hostPodNetworkFirst = 128 // 10.244.128.0
	hostPodNetworkLast  = 255 // 10.244.255.255
	// podGateway is the root namespace's address on every Pod's veth pair: the source of what the
	// API server (or a test) sends to a Pod, and the only address a Pod can send to.
	podGateway = "10.244.128.1"
)

// podNet is a Pod's network: its sandbox, its address and the forwarder to the API server.
type podNet struct {
	ip       string
	netns    string // /proc/<sandbox>/ns/net
	hostLink string // the veth end in the root namespace
	sandbox  *devenv.Child
	apiProxy *serviceProxy
}

// startPodNet makes a Pod's network namespace, gives it a free address of hostPodNetwork over a
// veth pair, and forwards apiServer (a URL) inside it. name names the sandbox process.
func startPodNet(ctx context.Context, procs *devenv.Processes, name, apiServer string) (*podNet, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("a Pod with an address of its own needs root (network namespace, veth pair, route)")
	}
	for _, tool := range []string{"unshare", "nsenter", "ip", "sleep", "sh"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("a Pod's network needs %s (util-linux, iproute2, coreutils): %w", tool, err)
		}
	}
	u, err := url.Parse(apiServer)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("the API server's address %q is no URL", apiServer)
	}
	apiAddr := u.Host
	if u.Port() == "" {
		apiAddr = net.JoinHostPort(u.Hostname(), "443")
	}

	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	cmd := exec.Command("unshare", "--net", "--", "sh", "-c", `ip link set lo up && echo ready && exec sleep infinity`)
	cmd.Stdout = w
	child, err := procs.Start(name+"-sandbox", cmd)
	_ = w.Close()
	if err != nil {
		return nil, fmt.Errorf("failed to make the Pod's network namespace: %w", err)
	}
	n := &podNet{sandbox: child, netns: fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid)}
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(r).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case l := <-line:
		if l != "ready" {
			n.stop()
			return nil, errors.New("the Pod's network namespace did not come up")
		}
	case <-time.After(30 * time.Second):
		n.stop()
		return nil, errors.New("the Pod's network namespace did not come up in time")
	case <-ctx.Done():
		n.stop()
		return nil, ctx.Err()
	}

	pid := fmt.Sprint(cmd.Process.Pid)
	for attempt := 0; ; attempt++ {
		if attempt == 64 {
			n.stop()
			return nil, errors.New("no free Pod address in 10.244.128.0/17 after 64 tries")
		}
		third := hostPodNetworkFirst + rand.IntN(hostPodNetworkLast-hostPodNetworkFirst+1)
		fourth := 2 + rand.IntN(253) // not .0, .1 (the gateway's in 10.244.128.0/24), .255
		ip := fmt.Sprintf("10.244.%d.%d", third, fourth)
		link := fmt.Sprintf("kp%02x%02x", third, fourth)
		out, err := exec.Command("ip", "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", pid).CombinedOutput()
		if err != nil {
			if strings.Contains(string(out), "exists") {
				continue // another Pod on this machine has this address
			}
			n.stop()
			return nil, fmt.Errorf("ip link add %s: %v: %s", link, err, strings.TrimSpace(string(out)))
		}
		n.hostLink = link
		if out, err := exec.Command("ip", "link", "set", link, "up").CombinedOutput(); err != nil {
			n.stop()
			return nil, fmt.Errorf("ip link set %s up: %v: %s", link, err, strings.TrimSpace(string(out)))
		}
		if out, err := exec.Command("ip", "addr", "add", podGateway+"/32", "dev", link).CombinedOutput(); err != nil {
			n.stop()
			return nil, fmt.Errorf("ip addr add %s dev %s: %v: %s", podGateway, link, err, strings.TrimSpace(string(out)))
		}
		if out, err := exec.Command("ip", "route", "add", ip+"/32", "dev", link, "src", podGateway).CombinedOutput(); err != nil {
			_ = exec.Command("ip", "link", "del", link).Run()
			n.hostLink = ""
			if strings.Contains(string(out), "exists") {
				continue // routed elsewhere on this machine
			}
			n.stop()
			return nil, fmt.Errorf("ip route add %s: %v: %s", ip, err, strings.TrimSpace(string(out)))
		}
		n.ip = ip
		break
	}
	setup := [][]string{
		{"nsenter", "--net=" + n.netns, "--", "ip", "addr", "add", n.ip + "/32", "dev", "eth0"},
		{"nsenter", "--net=" + n.netns, "--", "ip", "link", "set", "eth0", "up"},
		{"nsenter", "--net=" + n.netns, "--", "ip", "route", "add", podGateway + "/32", "dev", "eth0"},
	}
	for _, c := range setup {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			n.stop()
			return nil, fmt.Errorf("%s: %v: %s", strings.Join(c, " "), err, strings.TrimSpace(string(out)))
		}
	}
	ln, err := listenIn(n.netns, apiAddr)
	if err != nil {
		n.stop()
		return nil, fmt.Errorf("failed to listen on %s in the Pod: %w", apiAddr, err)
	}
	n.apiProxy = newServiceProxy(ln, func() (net.Conn, error) { return net.DialTimeout("tcp", apiAddr, 10*time.Second) })
	return n, nil
}

// stop ends the Pod's network: the forwarder, the sandbox (and with it the namespace and the
// veth pair) and the root end of the pair, should it outlive the namespace.
func (n *podNet) stop() {
	if n.apiProxy != nil {
		n.apiProxy.close()
		n.apiProxy = nil
	}
	if n.sandbox != nil {
		_ = n.sandbox.Cmd.Process.Kill()
		_ = n.sandbox.Wait()
		n.sandbox = nil
	}
	if n.hostLink != "" {
		_ = exec.Command("ip", "link", "del", n.hostLink).Run() // gone with the namespace already, usually
		n.hostLink = ""
	}
}
