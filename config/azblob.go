package config

import (
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/objsink"
	"github.com/flightline/flightline/flightsink/objsink/azblob"
	"github.com/flightline/flightline/internal/spec"
)

// azblobSinkConfig is the azblob: sink kind. The key and the SAS token are
// secrets: write them ${VAR} in a config file, or leave them out and set
// AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN (AZURE_STORAGE_ACCOUNT for
// the account) in the environment.
type azblobSinkConfig struct {
	objLayout
	Account  string `spec:"account" doc:"the storage account; default: $AZURE_STORAGE_ACCOUNT"`
	Key      string `spec:"key" secret:"true" doc:"the account's shared key; write it ${VAR}; default: $AZURE_STORAGE_KEY"`
	SAS      string `spec:"sas" secret:"true" doc:"a SAS token for the container (read, add, create, write, delete, list) instead of the key; write it ${VAR}; default: $AZURE_STORAGE_SAS_TOKEN"`
	Endpoint string `spec:"endpoint" doc:"the service URL, e.g. Azurite's http://127.0.0.1:10000/devstoreaccount1; default: https://ACCOUNT.blob.core.windows.net"`
}

var azblobSpec = spec.New[azblobSinkConfig]("azblob", "azblob:CONTAINER/PREFIX?account=…&format=parquet|jsonl|csv",
	"exactly-once part files under the container's PREFIX/<target>/, committed by If-None-Match: * records", nil)

func init() {
	sinkKinds["azblob"] = sinkOf(azblobSpec, openAzblob).at("prefix", "CONTAINER/PREFIX the blobs go under")
}

func openAzblob(e env, u *url.URL, c azblobSinkConfig) (flightsink.Sink, func(), error) {
	loc := location(u)
	if u.Host != "" || loc == "" {
		return nil, nil, fmt.Errorf("azblob: want azblob:CONTAINER/PREFIX (no //), e.g. azblob:my-container/events")
	}
	cont, prefix, _ := strings.Cut(strings.Trim(loc, "/"), "/")
	cfg, err := c.layout()
	if err != nil {
		return nil, nil, fmt.Errorf("azblob: %w", err)
	}
	orEnv := func(v, name string) string {
		if v == "" {
			return os.Getenv(name)
		}
		return v
	}
	account := orEnv(c.Account, "AZURE_STORAGE_ACCOUNT")
	key, sas := c.Key, c.SAS
	if key == "" && sas == "" {
		key, sas = os.Getenv("AZURE_STORAGE_KEY"), os.Getenv("AZURE_STORAGE_SAS_TOKEN")
		if key != "" {
			sas = "" // both in the environment: the key
		}
	}
	b, err := azblob.New(e.ctx, azblob.Config{Container: cont, Prefix: prefix, Account: account, Key: key, SAS: sas, Endpoint: c.Endpoint})
	if err != nil {
		return nil, nil, err
	}
	cfg.Backend, cfg.Name = b, "azblob sink"
	s, err := objsink.New(e.ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	return objSink{Sink: s, how: "If-None-Match: * commit records, server-side copies"}, func() {}, nil
}
