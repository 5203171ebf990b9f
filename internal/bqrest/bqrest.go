// Package bqrest reads BigQuery (or its emulator) through the REST API
// with plain net/http and no Google client library: the independent reader
// the BigQuery tests check the sink's tables with.
package bqrest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Query runs sql (GoogleSQL) through jobs.query at endpoint
// (http://HOST:PORT) in project, without authentication, and returns the
// rows as strings (NULL as nil). A missing table is ErrNoTable.
func Query(ctx context.Context, endpoint, project, sql string) ([][]*string, error) {
	body, _ := json.Marshal(map[string]any{"query": sql, "useLegacySql": false, "maxResults": 10_000_000, "timeoutMs": 120_000})
	url := strings.TrimRight(endpoint, "/") + "/bigquery/v2/projects/" + project + "/queries"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		if resp.StatusCode == http.StatusNotFound || strings.Contains(string(raw), "not found") {
			return nil, fmt.Errorf("%w: %s", ErrNoTable, raw)
		}
		return nil, fmt.Errorf("bqrest: %s: %s", resp.Status, raw)
	}
	var out struct {
		JobComplete *bool `json:"jobComplete"`
		PageToken   string
		Rows        []struct {
			F []struct {
				V *string `json:"v"`
			} `json:"f"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("bqrest: %v: %s", err, raw)
	}
	if out.JobComplete != nil && !*out.JobComplete {
		return nil, fmt.Errorf("bqrest: the query did not complete in time")
	}
	if out.PageToken != "" {
		return nil, fmt.Errorf("bqrest: the result has more than one page")
	}
	rows := make([][]*string, len(out.Rows))
	for i, r := range out.Rows {
		for _, f := range r.F {
			rows[i] = append(rows[i], f.V)
		}
	}
	return rows, nil
}

// ErrNoTable is returned when the queried table does not exist.
var ErrNoTable = fmt.Errorf("bqrest: table not found")

// CreateDataset creates dataset in project through datasets.insert.
func CreateDataset(ctx context.Context, endpoint, project, dataset string) error {
	body, _ := json.Marshal(map[string]any{"datasetReference": map[string]string{"projectId": project, "datasetId": dataset}})
	return call(ctx, http.MethodPost, strings.TrimRight(endpoint, "/")+"/bigquery/v2/projects/"+project+"/datasets", body)
}

// DeleteDataset deletes dataset and its tables through datasets.delete.
func DeleteDataset(ctx context.Context, endpoint, project, dataset string) error {
	return call(ctx, http.MethodDelete, strings.TrimRight(endpoint, "/")+"/bigquery/v2/projects/"+project+"/datasets/"+dataset+"?deleteContents=true", nil)
}

func call(ctx context.Context, method, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("bqrest: %s %s: %s: %s", method, url, resp.Status, raw)
	}
	return nil
}
