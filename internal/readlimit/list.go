package readlimit

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// List reads a paged list: fetch is called with Limit pageSize, then with each continue token it
// returns, until there is none, and fn with every item. It fails with an *Error once the list
// would take more than l.MaxListPages pages or hold more than l.MaxListItems items; fn never
// sees an item past the item cap. subject names the list in the error ("node list").
func List[T any](ctx context.Context, l Limits, subject string, pageSize int64,
	fetch func(context.Context, metav1.ListOptions) (items []T, continueToken string, err error), fn func(*T)) error {
	l = l.WithDefaults()
	opts := metav1.ListOptions{Limit: pageSize}
	seen := 0
	for pages := 1; ; pages++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		items, next, err := fetch(ctx, opts)
		if err != nil {
			return err
		}
		if seen += len(items); seen > l.MaxListItems {
			return &Error{Subject: subject, Limit: countLimit(int64(l.MaxListItems), "items")}
		}
		for i := range items {
			fn(&items[i])
		}
		if next == "" {
			return nil
		}
		if pages >= l.MaxListPages {
			return &Error{Subject: subject, Limit: countLimit(int64(l.MaxListPages), "pages")}
		}
		opts.Continue = next
	}
}
