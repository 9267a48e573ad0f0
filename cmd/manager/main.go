// Command manager is the one KubeOpera manager: it engages every kcp workspace bound to the
// platform's exports, does the work on the backend cluster and writes status back.
//
// `manager register-host [flags]` records the backend cluster as the host instead (register.go).
package main

import (
	"flag"
	"os"

	"github.com/kubeopera/kubeopera/workspaces/bootstrap"

	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/kubeopera/kubeopera/internal/manager"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == registerHostCommand {
		ctx := ctrl.SetupSignalHandler()
		ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
		os.Exit(runRegisterHost(ctx, os.Args[2:], os.Stdout, os.Stderr))
	}
	opts := manager.DefaultOptions()
	opts.BindFlags(pflag.CommandLine)
	zapOpts := zap.Options{TimeEncoder: zapcore.ISO8601TimeEncoder}
	goFlags := flag.NewFlagSet("zap", flag.ExitOnError)
	zapOpts.BindFlags(goFlags)
	pflag.CommandLine.AddGoFlagSet(goFlags)
	pflag.Parse()
	if !pflag.CommandLine.Changed("zap-devel") {
		// ENVIRONMENT=development selects development logging unless --zap-devel says otherwise.
		zapOpts.Development = opts.Environment == "development"
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")

	cfgs, err := opts.Configs()
	if err != nil {
		log.Error(err, "Invalid configuration")
		os.Exit(1)
	}
	ctx := ctrl.LoggerInto(ctrl.SetupSignalHandler(), ctrl.Log)
	if err := manager.CheckKCP(ctx, cfgs.KCP); err != nil {
		log.Error(err, "Refusing to start against this kcp")
		os.Exit(1)
	}
	if opts.Bootstrap {
		log.Info("Bootstrapping the platform workspace", "workspace", opts.PlatformWorkspace)
		if err := bootstrap.Bootstrap(ctx, cfgs.KCP, opts.PlatformWorkspace); err != nil {
			log.Error(err, "Bootstrap failed")
			os.Exit(1)
		}
	}
	if err := manager.Run(ctx, opts, cfgs); err != nil {
		log.Error(err, "Manager stopped with an error")
		os.Exit(1)
	}
}
