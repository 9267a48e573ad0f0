// Package platform starts kcp and a backend installed as the product is before a manager runs,
// for suites that run the manager binary (e2e, bench). It is apart from package framework, which
// package workspaces' own tests import.
package platform

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/kubeopera/kubeopera/internal/devenv"
	"github.com/kubeopera/kubeopera/test/framework"
)

// ManagerKCPUser is the kcp user the manager runs as in tests (devenv.ManagerKCPUser).
const ManagerKCPUser = devenv.ManagerKCPUser

// Platform is kcp and a backend installed as the product is before a manager runs.
type Platform struct {
	KCP     *devenv.KCP
	Backend *devenv.Backend
}

// Start starts kcp and a backend side by side with their state in dir (kcp/, backend/) and
// installs the platform as bin/devenv does (devenv.InstallPlatform). stop stops both servers.
func Start(ctx context.Context, dir string) (p *Platform, stop func(), err error) {
	return StartSharded(ctx, dir, 1)
}

// StartSharded is Start with kcp on shards shards behind its front proxy
// (framework.StartShardedKCPIn); 1 starts one kcp server.
func StartSharded(ctx context.Context, dir string, shards int) (p *Platform, stop func(), err error) {
	p = &Platform{}
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	kcpDir, backendDir := filepath.Join(dir, "kcp"), filepath.Join(dir, "backend")
	for _, d := range []string{kcpDir, backendDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, nil, err
		}
	}
	// kcp and the backend start side by side; each one that started is stopped with the rest.
	var (
		backendStop func()
		backendErr  error
		backendUp   = make(chan struct{})
	)
	go func() {
		defer close(backendUp)
		p.Backend, backendStop, backendErr = framework.StartBackendIn(backendDir)
	}()
	kcp, kcpStop, kcpErr := framework.StartShardedKCPIn(kcpDir, shards)
	<-backendUp
	if kcpErr == nil {
		p.KCP = kcp
		stops = append(stops, kcpStop)
	}
	if backendErr == nil {
		stops = append(stops, backendStop)
	}
	if err := errors.Join(kcpErr, backendErr); err != nil {
		return nil, nil, err
	}
	if err := devenv.InstallPlatform(ctx, p.KCP.Config, p.Backend.Config); err != nil {
		return nil, nil, err
	}
	return p, stop, nil
}
