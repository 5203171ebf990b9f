package flightsrc

import (
	"encoding/json"
	"fmt"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/endpoint"
)

// ActionCommit is the advisory progress action a source server answers.
const ActionCommit = "commit"

// ActionPrepare is the action a source server answers with the source's
// Prepare (see Preparer), or at once when the source has none.
const ActionPrepare = "prepare"

// Ticket is the JSON a DoGet ticket carries. See docs/protocol.md.
//
//	{"stream":"orders","pipeline_id":"orders-to-delta","checkpoint":"<base64>"}
//
// Checkpoint is standard padded base64 of the opaque checkpoint to resume
// after; omitted or empty means the source's default start.
type Ticket struct {
	Stream     string `json:"stream"`
	PipelineID string `json:"pipeline_id,omitempty"`
	Checkpoint []byte `json:"checkpoint,omitempty"` // encoding/json uses standard base64
}

// CommitBody is the JSON body of the "commit" action.
type CommitBody struct {
	Stream     string `json:"stream"`
	PipelineID string `json:"pipeline_id,omitempty"`
	Checkpoint []byte `json:"checkpoint"`
}

// PrepareBody is the JSON body of the "prepare" action.
type PrepareBody struct {
	Stream     string `json:"stream"`
	PipelineID string `json:"pipeline_id,omitempty"`
}

func parseTicket(b []byte) (ReadRequest, error) {
	var t Ticket
	if err := json.Unmarshal(b, &t); err != nil {
		return ReadRequest{}, fmt.Errorf("%w: DoGet ticket must be JSON {\"stream\", \"pipeline_id\", \"checkpoint\"}: %v", flightline.ErrInvalidInput, err)
	}
	if t.Stream == "" {
		return ReadRequest{}, fmt.Errorf("%w: DoGet ticket without stream", flightline.ErrInvalidInput)
	}
	if err := checkName("stream", t.Stream); err != nil {
		return ReadRequest{}, err
	}
	if err := checkName("pipeline_id", t.PipelineID); err != nil {
		return ReadRequest{}, err
	}
	req := ReadRequest{Stream: t.Stream, Pipeline: t.PipelineID}
	if len(t.Checkpoint) > 0 {
		req.After = t.Checkpoint
	}
	return req, nil
}

// checkName refuses a client-supplied name longer than
// endpoint.MaxNameSize.
func checkName(what, name string) error {
	if len(name) > endpoint.MaxNameSize {
		return fmt.Errorf("%w: %s of %d bytes; at most %d are allowed", flightline.ErrInvalidInput, what, len(name), endpoint.MaxNameSize)
	}
	return nil
}
