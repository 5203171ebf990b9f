package config

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
)

func TestKafkaSinkSpec(t *testing.T) {
	for spec, want := range map[string]string{
		"kafka:?brokers=127.0.0.1:1&value_format=xml":         "xml",
		"kafka:?brokers=127.0.0.1:1&value_format=":            "value_format",
		"kafka:?brokers=127.0.0.1:1&key=_op":                  "change column",
		"kafka:?brokers=127.0.0.1:1&key=p&partition_column=p": "partition column",
		"kafka:?brokers=127.0.0.1:1&bogus=1":                  "unknown option(s) bogus",
		"kafka:?topic=x":                                      "bootstrap servers",
		"kafka:?brokers=127.0.0.1:1&create_topics=zero":       "create_topics",
		"kafka:?brokers=127.0.0.1:1&sasl=kerberos":            "sasl",
	} {
		_, _, err := openSink(testEnv, spec, flightsink.ClientConfig{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error containing %q", spec, err, want)
		}
	}
	_, _, err := openSink(testEnv, "kafka:?brokers=127.0.0.1:1&value_format=avro", flightsink.ClientConfig{})
	if !errors.Is(err, flightline.ErrInvalidInput) {
		t.Errorf("value_format=avro: %v, want ErrInvalidInput", err)
	}
	s, closeFn, err := openSink(testEnv, "kafka:?brokers=127.0.0.1:1&topic=t&value_format=raw&partition_column=p&create_topics=3&transaction_timeout=20s&batch_timeout=5s&client_id=c", flightsink.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	if flightsink.GuaranteeOf(s) != flightsink.ExactlyOnce {
		t.Error("kafka sink must declare exactly-once")
	}
	u, err := url.ParseQuery("brokers=127.0.0.1:1&value_format=json&key=id,region")
	if err != nil {
		t.Fatal(err)
	}
	c, err := kafkaSinkSpec.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := c.sinkConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ValueFormat != "json" || strings.Join(cfg.Key, ",") != "id,region" {
		t.Errorf("value_format json, key id,region: %+v", cfg)
	}
	yml, err := Parse("flightline.yml", []byte(`
sinks:
  k:
    kafka: {brokers: [127.0.0.1:1], topic: orders, value_format: json, key: [id, region]}
`), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	_, q := yml.sinks["k"].kindURL()
	if c, err = kafkaSinkSpec.Parse(q); err != nil {
		t.Fatal(err)
	}
	if *c.ValueFormat != "json" || strings.Join(c.Key, ",") != "id,region" {
		t.Errorf("YAML value_format json, key [id, region]: %+v", c)
	}
}
