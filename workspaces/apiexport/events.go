package apiexport

import (
	"context"
	"fmt"
	"hash/maphash"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/reference"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var eventsDropped = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "kubeopera_workspace_events_dropped_total",
	Help: "Events for tenant workspaces not written, by reason: queue full, duplicate, or write failed.",
}, []string{"reason"})

func init() { metrics.Registry.MustRegister(eventsDropped) }

// EventSink writes the events of every workspace through the shards' shared writers: one bounded
// queue and a fixed set of workers for all, instead of a broadcaster (and its goroutines) per
// workspace. An event equal to one written in the last DedupWindow for the same object is
// dropped rather than counted up on the first (which the claim's patch verb would allow), so a
// reconcile that keeps waiting on something writes nothing to kcp until the window has passed.
// Events are best effort: a full queue drops them, as client-go's broadcaster does.
type EventSink struct {
	// Scheme resolves the kinds of the objects events are about.
	Scheme *runtime.Scheme
	// QueueSize bounds the events waiting to be written (default 1024).
	QueueSize int
	// Workers write events concurrently (default 2).
	Workers int
	// DedupWindow drops repeats of an event within it (default 10m).
	DedupWindow time.Duration
	// Log is told about events that cannot be written, at V(1).
	Log logr.Logger

	once  sync.Once
	queue chan pendingEvent
	mu    sync.Mutex
	// seen holds when each event (by the hash of its workspace, object, type, reason and
	// message: 8 bytes, not the message) was last queued.
	seen map[uint64]time.Time
	seed maphash.Seed
	host string
}

type pendingEvent struct {
	ws    Workspace
	event *corev1.Event
}

func (s *EventSink) init() {
	s.once.Do(func() {
		if s.QueueSize == 0 {
			s.QueueSize = 1024
		}
		if s.Workers == 0 {
			s.Workers = 2
		}
		if s.DedupWindow == 0 {
			s.DedupWindow = 10 * time.Minute
		}
		s.queue = make(chan pendingEvent, s.QueueSize)
		s.seen = map[uint64]time.Time{}
		s.seed = maphash.MakeSeed()
		s.host, _ = os.Hostname()
	})
}

// Start runs the workers until ctx ends (manager.Runnable).
func (s *EventSink) Start(ctx context.Context) error {
	s.init()
	var wg sync.WaitGroup
	for range s.Workers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case e := <-s.queue:
					s.write(ctx, e)
				}
			}
		})
	}
	wg.Wait()
	return nil
}

// NeedLeaderElection: only the leader reconciles, so only it records.
func (s *EventSink) NeedLeaderElection() bool { return false }

func (s *EventSink) write(ctx context.Context, e pendingEvent) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := e.ws.shard.writer.Create(WithCluster(ctx, e.ws.LogicalCluster), e.event); err != nil {
		eventsDropped.WithLabelValues("write_failed").Inc()
		s.Log.V(1).Info("Event not written", "cluster", e.ws.LogicalCluster, "object", e.event.InvolvedObject.Name, "reason", e.event.Reason, "error", err.Error())
	}
}

// enqueue queues ev unless it repeats a recent one or the queue is full.
func (s *EventSink) enqueue(ws Workspace, ev *corev1.Event) {
	s.init()
	key := maphash.String(s.seed, ws.LogicalCluster+"|"+string(ev.InvolvedObject.UID)+"|"+ev.Type+"|"+ev.Reason+"|"+ev.Message)
	now := time.Now()
	s.mu.Lock()
	if last, ok := s.seen[key]; ok && now.Sub(last) < s.DedupWindow {
		s.mu.Unlock()
		eventsDropped.WithLabelValues("duplicate").Inc()
		return
	}
	if len(s.seen) >= 4*s.QueueSize {
		// Bounded memory: forget what is older than the window, or everything.
		for k, t := range s.seen {
			if now.Sub(t) >= s.DedupWindow {
				delete(s.seen, k)
			}
		}
		if len(s.seen) >= 4*s.QueueSize {
			clear(s.seen)
		}
	}
	s.seen[key] = now
	s.mu.Unlock()
	select {
	case s.queue <- pendingEvent{ws: ws, event: ev}:
	default:
		eventsDropped.WithLabelValues("queue_full").Inc()
	}
}

// recorder is one workspace's events.EventRecorder on the sink; made per request.
type recorder struct {
	ws         Workspace
	controller string
}

// Eventf implements events.EventRecorder; it writes a core/v1 Event (the kind the exports claim).
func (r recorder) Eventf(regarding, _ runtime.Object, eventtype, reason, action, note string, args ...any) {
	s := r.ws.provider.opts.Events
	if s == nil || regarding == nil {
		return
	}
	ref, err := reference.GetReference(s.Scheme, regarding)
	if err != nil {
		s.Log.V(1).Info("Event not recorded: no reference to its object", "error", err.Error())
		return
	}
	now := metav1.Now()
	s.enqueue(r.ws, &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: ref.Namespace, Name: fmt.Sprintf("%s.%x", ref.Name, now.UnixNano())},
		InvolvedObject:      *ref,
		Reason:              reason,
		Message:             fmt.Sprintf(note, args...),
		Type:                eventtype,
		Action:              action,
		Source:              corev1.EventSource{Component: r.controller},
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		ReportingController: r.controller,
		ReportingInstance:   s.host,
	})
}

var _ events.EventRecorder = recorder{}
