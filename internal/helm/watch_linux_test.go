package helm

import (
	"bytes"
	"errors"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"
)

// watchCreations reports every entry created (or moved) into dirs from now
// until the returned function is called, even if it was removed again, which
// a walk afterwards cannot see. It uses inotify, which works for root too.
func watchCreations(t *testing.T, dirs []string) (created func() []string) {
	t.Helper()
	fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		t.Fatalf("inotify: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	watched := map[int32]string{}
	for _, dir := range dirs {
		wd, err := syscall.InotifyAddWatch(fd, dir, syscall.IN_CREATE|syscall.IN_MOVED_TO)
		if err != nil {
			t.Fatalf("inotify watch %s: %v", dir, err)
		}
		watched[int32(wd)] = dir
	}
	return func() []string {
		var paths []string
		buf := make([]byte, 64*1024)
		for {
			n, err := syscall.Read(fd, buf)
			if errors.Is(err, syscall.EAGAIN) {
				return paths
			}
			if err != nil {
				t.Fatalf("inotify read: %v", err)
			}
			for off := 0; off+syscall.SizeofInotifyEvent <= n; {
				ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
				name := buf[off+syscall.SizeofInotifyEvent : off+syscall.SizeofInotifyEvent+int(ev.Len)]
				paths = append(paths, filepath.Join(watched[ev.Wd], string(bytes.TrimRight(name, "\x00"))))
				off += syscall.SizeofInotifyEvent + int(ev.Len)
			}
		}
	}
}
