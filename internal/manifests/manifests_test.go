package manifests

import "testing"

func TestDecode(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    []string // kinds
		wantErr bool
	}{
		"several documents, empty ones skipped": {
			in:   "# a comment\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
			want: []string{"Namespace", "ConfigMap"},
		},
		"nothing":     {in: "", want: nil},
		"not YAML":    {in: "apiVersion: v1\nkind: [\n", wantErr: true},
		"JSON object": {in: `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"}}`, want: []string{"Secret"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			objs, err := Decode([]byte(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("error = %v, want error %v", err, tc.wantErr)
			}
			var kinds []string
			for _, o := range objs {
				kinds = append(kinds, o.GetKind())
			}
			if len(kinds) != len(tc.want) {
				t.Fatalf("kinds = %v, want %v", kinds, tc.want)
			}
			for i := range kinds {
				if kinds[i] != tc.want[i] {
					t.Errorf("kinds = %v, want %v", kinds, tc.want)
				}
			}
		})
	}
}
