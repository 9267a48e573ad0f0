package devenv

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Island is a network namespace of its own, with only its loopback interface, for servers that
// cannot be told to listen on loopback only (Crossplane core binds its metrics and health probe
// listeners to ":<port>", every interface: cmd/crossplane/core/core.go). Processes started in it
// (Start) reach nothing outside but what Forward puts there, and nothing outside reaches them:
// their listeners, whatever address they name, are on the island's own loopback, and no traffic
// can leave the machine from it (there is no route). Forward listens on the island's 127.0.0.1
// and carries each connection to an address this process dials: the island's servers reach the
// apiserver at the very URL of its kubeconfig.
//
// How: one goroutine locked to its own OS thread moves that thread into a new network namespace
// (unshare(CLONE_NEWNET), which needs CAP_SYS_ADMIN: root; never the main thread, whose namespace
// /proc/self/net shows as the process's), brings lo up, and then runs, on that
// thread, every call that must happen inside: creating Forward's listening sockets (a socket
// belongs to the namespace of the thread that created it) and forking the island's processes (a
// child inherits its parent thread's namespace). Go never runs another goroutine on a locked
// thread, and a locked thread's clones are made by the runtime's template thread, not by it
// (runtime/proc.go newm), so nothing else of this process ends up inside. The thread is the
// parent thread of the island's processes, so it lives until Close (see Processes: their
// parent-death signal fires when it ends).
type Island struct {
	calls chan func()
	done  chan struct{}

	mu        sync.Mutex
	closed    bool
	listeners []net.Listener
	conns     map[net.Conn]bool
}

// NewIsland makes a new island.
func NewIsland() (*Island, error) {
	is := &Island{calls: make(chan func()), done: make(chan struct{}), conns: map[net.Conn]bool{}}
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			is.run(ready, nil)
			return
		}
		// The main thread: /proc/self/net and the like show its namespace as the process's, and
		// Go never ends it (a goroutine that exits locked to it wedges it), so it must not move.
		// Another goroutine takes over; it cannot land on this thread while it is locked here.
		locked := make(chan struct{})
		go is.run(ready, locked)
		<-locked
		runtime.UnlockOSThread()
	}()
	if err := <-ready; err != nil {
		return nil, err
	}
	return is, nil
}

// run moves a thread of its own into a new network namespace and runs the island's calls on it
// until Close; locked, when not nil, is closed once the thread is locked.
func (is *Island) run(ready chan<- error, locked chan<- struct{}) {
	defer close(is.done)
	// Never unlocked: the thread is in the island's namespace and ends with this goroutine.
	runtime.LockOSThread()
	if locked != nil {
		close(locked)
	}
	if unix.Gettid() == unix.Getpid() {
		ready <- errors.New("the island's thread is the main thread")
		return
	}
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		ready <- fmt.Errorf("failed to make a network namespace (unshare(CLONE_NEWNET) needs CAP_SYS_ADMIN, i.e. root): %w", err)
		return
	}
	if err := loopbackUp(); err != nil {
		ready <- fmt.Errorf("failed to bring up the loopback interface of a new network namespace: %w", err)
		return
	}
	ready <- nil
	for f := range is.calls {
		f()
	}
}

// loopbackUp sets the flag IFF_UP on lo (SIOCSIFFLAGS, netdevice(7)), as `ip link set lo up`
// does; a new network namespace has lo down.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer func() { _ = unix.Close(fd) }()
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// do runs f on the island's thread and returns its error.
func (is *Island) do(f func() error) error {
	is.mu.Lock()
	if is.closed {
		is.mu.Unlock()
		return errors.New("the island is closed")
	}
	errc := make(chan error, 1)
	// Sent while holding mu, so Close cannot close calls meanwhile.
	is.calls <- func() { errc <- f() }
	is.mu.Unlock()
	return <-errc
}

// Forward listens on the island's 127.0.0.1:port and carries every connection to to (host:port,
// dialled from outside the island) until Close.
func (is *Island) Forward(port int, to string) error {
	var ln net.Listener
	if err := is.do(func() (err error) {
		ln, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		return err
	}); err != nil {
		return fmt.Errorf("failed to listen on the island's 127.0.0.1:%d: %w", port, err)
	}
	is.mu.Lock()
	is.listeners = append(is.listeners, ln)
	is.mu.Unlock()
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			go is.pipe(in, to)
		}
	}()
	return nil
}

// pipe carries in to a new connection to to, both ways, until either side closes.
func (is *Island) pipe(in net.Conn, to string) {
	out, err := net.Dial("tcp", to)
	if err != nil {
		_ = in.Close()
		return
	}
	if !is.track(in, out) {
		_ = in.Close()
		_ = out.Close()
		return
	}
	done := make(chan struct{}, 2)
	carry := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go carry(out, in)
	go carry(in, out)
	<-done
	<-done
	_ = in.Close()
	_ = out.Close()
	is.untrack(in, out)
}

func (is *Island) track(conns ...net.Conn) bool {
	is.mu.Lock()
	defer is.mu.Unlock()
	if is.closed {
		return false
	}
	for _, c := range conns {
		is.conns[c] = true
	}
	return true
}

func (is *Island) untrack(conns ...net.Conn) {
	is.mu.Lock()
	defer is.mu.Unlock()
	for _, c := range conns {
		delete(is.conns, c)
	}
}

// Start starts cmd inside the island, like Processes.Start (tied to this process, recorded as
// name when p records): forked on the island's thread, it dies when Close ends that thread.
func (is *Island) Start(p *Processes, name string, cmd *exec.Cmd) (*Child, error) {
	tie(cmd)
	c := &Child{Cmd: cmd, done: make(chan struct{})}
	var rec *Record
	if err := is.do(func() error {
		if err := cmd.Start(); err != nil {
			return err
		}
		r, err := p.record(name, cmd.Process.Pid, cmd.Args)
		if err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return err
		}
		rec = r
		return nil
	}); err != nil {
		return nil, err
	}
	go func() {
		defer close(c.done)
		c.err = cmd.Wait()
		p.forget(rec)
	}()
	return c, nil
}

// Close stops forwarding and ends the island's thread, which kills the processes still running
// in it (their parent-death signal): stop them first.
func (is *Island) Close() {
	is.mu.Lock()
	if is.closed {
		is.mu.Unlock()
		return
	}
	is.closed = true
	for _, ln := range is.listeners {
		_ = ln.Close()
	}
	for c := range is.conns {
		_ = c.Close()
	}
	close(is.calls)
	is.mu.Unlock()
	<-is.done
}

// Reachable tells whether a TCP connection to addr can be made from inside the island.
func (is *Island) Reachable(addr string) bool {
	return is.do(func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	}) == nil
}
