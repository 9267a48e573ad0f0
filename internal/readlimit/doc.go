// Package readlimit caps what the manager reads from clusters it does not control: the targets
// tenants point HostClusters at. Such an "API server" may answer /version like a real one and
// then a node list with continue tokens forever, a body that decompresses to gigabytes, a list
// of millions of empty items (each decodes into a full Go object: `{}` is 2 bytes of JSON and a
// 768-byte corev1.Node), an encoding it was not asked for, or nothing at all.
//
//   - Wrap is a transport wrapper for a target's rest.Config: it reads each response body, as
//     Go's transport hands it over (after its transparent gzip decoding), up to
//     Limits.MaxResponseBytes, counts the JSON array elements in it up to
//     Limits.MaxResponseElements, and refuses binary and YAML encodings the request did not ask
//     for, before client-go decodes a byte. So client-go's decoding never buffers more than the
//     cap, and what it decodes cannot amplify past the element budget.
//   - List walks a paged list up to Limits.MaxListPages pages and Limits.MaxListItems items.
//
// Every limit that is hit is an *Error naming the limit; the reconcile skeleton
// (internal/reconcile) makes it a Stalled outcome with reason ReadLimitExceeded. A target that
// never answers is not a limit: each request has a timeout (rest.Config.Timeout) and every pass
// a deadline, and it is retried like an unreachable target.
package readlimit
