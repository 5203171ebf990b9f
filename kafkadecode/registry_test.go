package kafkadecode

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestRegistryClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "svc" || p != "secret" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/schemas/ids/1":
			fmt.Fprint(w, `{"schema": "\"string\""}`)
		case "/schemas/ids/2":
			fmt.Fprint(w, `{"schema": "syntax = \"proto3\";", "schemaType": "PROTOBUF"}`)
		case "/schemas/ids/3":
			fmt.Fprint(w, `not json`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	reg, err := NewRegistry(srv.URL+"/", RegistryBasicAuth("svc", "secret"))
	if err != nil {
		t.Fatal(err)
	}
	if s, err := reg.Schema(ctx, 1); err != nil || s != `"string"` {
		t.Fatalf("schema 1: %q %v", s, err)
	}
	for id, want := range map[uint32]error{2: ErrUnknownSchema, 3: ErrSchemaRegistry, 404: ErrUnknownSchema} {
		if _, err := reg.Schema(ctx, id); !errors.Is(err, want) {
			t.Fatalf("schema %d: %v, want %v", id, err, want)
		}
	}
	if IsRetryable(fmt.Errorf("x: %w", ErrUnknownSchema)) || !IsRetryable(fmt.Errorf("x: %w", ErrSchemaRegistry)) {
		t.Fatal("IsRetryable")
	}
	noAuth, err := NewRegistry(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := noAuth.Schema(ctx, 1); !errors.Is(err, ErrSchemaRegistry) {
		t.Fatalf("401 must be a registry failure: %v", err)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := noAuth.Schema(canceled, 7); !errors.Is(err, ErrSchemaRegistry) || !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled: %v", err)
	}
	for _, bad := range []string{"", "ftp://x", "http://", "::"} {
		if _, err := NewRegistry(bad); !errors.Is(err, ErrInvalidOption) {
			t.Fatalf("%q: %v", bad, err)
		}
	}
}
