package sim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
)

// JobService is a job service (the provisioner, the gitops-scaffolder) running in this process
// with the actor that plays its Jobs' Pods, as test/sim/provisioning and test/sim/scaffolding
// start them.
type JobService struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// RandomAPIKey is a fresh shared key for a job service started here.
func RandomAPIKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// StartJobService runs serve (the service's API on its listener) and actor until Stop; what
// either ends with, other than its context ending, is written to log with name.
func StartJobService(name string, log io.Writer, serve func(context.Context) error, actor *RunnerJobs) *JobService {
	ctx, cancel := context.WithCancel(context.Background())
	s := &JobService{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		errs := make(chan error, 2)
		go func() { errs <- serve(ctx) }()
		go func() { errs <- actor.Run(ctx) }()
		for range 2 {
			if err := <-errs; err != nil && !errors.Is(err, context.Canceled) {
				_, _ = fmt.Fprintf(log, "%s: %v\n", name, err)
			}
		}
	}()
	return s
}

// Stop stops the service and its actor and waits for both.
func (s *JobService) Stop() {
	s.cancel()
	<-s.done
}
