package framework

import (
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// HelmTemplate renders the chart in chartDir as release name in namespace with values, as `helm
// template` does (Helm 4's client-only dry run), and returns the rendered objects and the
// manifest they came from.
func HelmTemplate(t testing.TB, chartDir, name, namespace string, values map[string]any) ([]*unstructured.Unstructured, string) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	in := action.NewInstall(action.NewConfiguration(action.ConfigurationSetLogger(slog.DiscardHandler)))
	in.ReleaseName, in.Namespace = name, namespace
	in.DryRunStrategy, in.Replace = action.DryRunClient, true
	out, err := in.Run(ch, values)
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	rel, ok := out.(*release.Release)
	if !ok {
		t.Fatalf("helm template returned a %T", out)
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(rel.Manifest), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	return objs, rel.Manifest
}
