package ipcguard_test

import (
	"encoding/binary"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/flightline/flightline/flightsink/doputtest"
	"github.com/flightline/flightline/internal/ipcguard"
)

func TestValidMessagesPass(t *testing.T) {
	for _, v := range doputtest.Valid() {
		for i, m := range v.Messages {
			if _, err := ipcguard.Check(m.Header, m.Body, 1<<20); err != nil {
				t.Errorf("%s message %d: %v", v.Name, i, err)
			}
		}
	}
}

// TestBoundIsTheSum: two compressed buffers that each fit the bound but
// together do not are refused.
func TestBoundIsTheSum(t *testing.T) {
	v := doputtest.Valid()
	var lz4 []doputtest.Message
	for _, c := range v {
		if c.Name == "strings lz4" {
			lz4 = c.Messages
		}
	}
	m := lz4[1]
	l, err := ipcguard.Locate(m.Header)
	if err != nil {
		t.Fatal(err)
	}
	var declared int64
	for _, p := range l.Buffers {
		off := int64(binary.LittleEndian.Uint64(m.Header[p:]))
		n := int64(binary.LittleEndian.Uint64(m.Header[p+8:]))
		if n >= 8 {
			if d := int64(binary.LittleEndian.Uint64(m.Body[off:])); d > 0 {
				declared += d
			}
		}
	}
	if _, err := ipcguard.Check(m.Header, m.Body, declared); err != nil {
		t.Fatalf("bound = sum: %v", err)
	}
	if _, err := ipcguard.Check(m.Header, m.Body, declared-1); err == nil {
		t.Fatal("bound = sum - 1 accepted")
	}
}

// FuzzCheck: Check never panics, whatever the header and body, and
// neither does a Checker, on its own or after a schema of every type.
func FuzzCheck(f *testing.F) {
	for _, c := range append(doputtest.Valid(), doputtest.Cases()...) {
		for _, m := range c.Messages {
			f.Add(m.Header, m.Body)
		}
	}
	every := everyTypeStream(f, 3, ipc.WithLZ4())
	for _, m := range every {
		f.Add(m.Header, m.Body)
	}
	f.Fuzz(func(t *testing.T, header, body []byte) {
		_, _ = ipcguard.Check(header, body, 1<<20)
		_, _ = ipcguard.Locate(header)
		_, _ = ipcguard.NewChecker(1<<20).Check(header, body)
		c := ipcguard.NewChecker(1 << 20)
		if _, err := c.Check(every[0].Header, every[0].Body); err != nil {
			t.Fatal(err)
		}
		_, _ = c.Check(header, body)
	})
}
