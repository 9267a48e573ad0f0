package syncer

import "testing"

// TestErrorMessages pins what a tenant reads in a condition: the label to add, the conflicting
// Secret, and never any Secret data.
func TestErrorMessages(t *testing.T) {
	for name, tc := range map[string]struct {
		err  error
		want string
	}{
		"missing or unlabelled": {
			err:  &MissingSecretError{Namespace: "default", Name: "creds"},
			want: "secret default/creds not found or not labelled kubeopera.io/platform-access=true; add the label so the platform may read it",
		},
		"missing key": {
			err:  &MissingSecretError{Namespace: "default", Name: "creds", Key: "kubeconfig"},
			want: `secret default/creds has no key "kubeconfig"`,
		},
		"visible but unlabelled": {
			err:  &UnsharedSecretError{Namespace: "default", Name: "creds"},
			want: "secret default/creds is not labelled kubeopera.io/platform-access=true; add the label so the platform may read it",
		},
		"delivery over a visible foreign secret": {
			err:  &DeliveryConflictError{Namespace: "team-a", Name: "tenant-cs-kubeconfig", Owner: "Tenant team-a/t"},
			want: "secret team-a/tenant-cs-kubeconfig already exists and is not owned by Tenant team-a/t; refusing to overwrite it",
		},
		"delivery over a hidden secret": {
			err:  &DeliveryConflictError{Namespace: "team-a", Name: "tenant-cs-kubeconfig", Owner: "Tenant team-a/t", Unshared: true},
			want: "secret team-a/tenant-cs-kubeconfig already exists and is not shared with the platform (no label kubeopera.io/platform-access=true); refusing to overwrite it (delete it so Tenant team-a/t can deliver its Secret)",
		},
	} {
		t.Run(name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}
