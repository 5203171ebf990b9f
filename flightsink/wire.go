package flightsink

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/flighterr"
)

// Action types a sink server answers. See docs/protocol.md.
const (
	// ActionCheckpoint returns the last committed checkpoint of a pipeline:
	// one Result whose body is the checkpoint, or no Result when none.
	ActionCheckpoint = "checkpoint"
	// ActionDescribe returns one Result with a JSON object describing the
	// sink, e.g. {"guarantee":"exactly-once"}.
	ActionDescribe = "describe"
)

// PipelineRequest is the JSON body of the "checkpoint" action.
type PipelineRequest struct {
	PipelineID string `json:"pipeline_id"`
	Target     string `json:"target,omitempty"`
}

// PutCommand is the JSON a DoPut FlightDescriptor of type CMD carries.
// ResumeAfter, when present (even empty), is the checkpoint the writer
// believes is the pipeline's last: the server refuses the stream with
// Aborted if the pipeline's checkpoint differs once it has claimed it, so a
// writer can never append after a checkpoint it did not see. Absent, no
// check is made.
//
// Claim names the writer's claim (Claim.ID: e.g. one run of a
// coordinator) and Rejoin asks to claim the pipeline only if the newest
// claim the server recorded for it is that one (Claim.Rejoin); see
// docs/protocol.md, "Rejoining a claim". Both are optional: a server that
// predates them ignores them and claims as usual.
type PutCommand struct {
	PipelineID  string  `json:"pipeline_id"`
	Target      string  `json:"target,omitempty"`
	ResumeAfter *string `json:"resume_after,omitempty"` // base64 (standard, padded)
	Claim       string  `json:"claim,omitempty"`
	Rejoin      bool    `json:"rejoin,omitempty"`
}

// Describe is the JSON body of the "describe" action's Result.
type Describe struct {
	Guarantee string `json:"guarantee"`
}

// checkNames refuses a pipeline id or target longer than
// endpoint.MaxNameSize.
func checkNames(p Pipeline) error {
	if len(p.ID) > endpoint.MaxNameSize || len(p.Target) > endpoint.MaxNameSize {
		return fmt.Errorf("%w: pipeline id of %d bytes, target of %d; at most %d are allowed", flightline.ErrInvalidInput, len(p.ID), len(p.Target), endpoint.MaxNameSize)
	}
	return nil
}

// CheckDirTarget is the rule for targets that name a directory under a
// sink's root (Dir, Delta): empty (the default), or one plain directory
// name: no '/' or '\', not absolute, not "." or "..", not hidden (a
// leading '.'), no NUL, at most endpoint.MaxNameSize bytes. Anything else
// is ErrInvalidInput, so no target can reach outside the root or into the
// sink's own files.
func CheckDirTarget(t string) error {
	if t == "" {
		return nil
	}
	if len(t) > endpoint.MaxNameSize || strings.ContainsAny(t, "/\\\x00") || strings.HasPrefix(t, ".") {
		return fmt.Errorf("%w: target %q must be a plain directory name", flightline.ErrInvalidInput, flighterr.Clip(t))
	}
	return nil
}

// putRequest is what a DoPut descriptor asks for.
type putRequest struct {
	p      Pipeline
	expect []byte // resume_after, when check
	check  bool
	claim  Claim
}

// parseDescriptor reads the pipeline, the optional expectation and the
// optional claim from a DoPut descriptor: PATH [pipeline_id] or
// [pipeline_id, target], or CMD with a PutCommand.
func parseDescriptor(d *flight.FlightDescriptor) (r putRequest, err error) {
	if d == nil {
		return r, fmt.Errorf("%w: DoPut without a FlightDescriptor", flightline.ErrInvalidInput)
	}
	switch d.Type {
	case flight.DescriptorPATH:
		if len(d.Path) < 1 || len(d.Path) > 2 || d.Path[0] == "" {
			return r, fmt.Errorf("%w: DoPut descriptor path must be [pipeline_id] or [pipeline_id, target], got %d elements", flightline.ErrInvalidInput, len(d.Path))
		}
		r.p.ID = d.Path[0]
		if len(d.Path) == 2 {
			r.p.Target = d.Path[1]
		}
		return r, checkNames(r.p)
	case flight.DescriptorCMD:
		var c PutCommand
		if err := json.Unmarshal(d.Cmd, &c); err != nil {
			return r, fmt.Errorf("%w: DoPut command is not JSON: %s", flightline.ErrInvalidInput, flighterr.Clip(err.Error()))
		}
		if c.PipelineID == "" {
			return r, fmt.Errorf("%w: DoPut command without pipeline_id", flightline.ErrInvalidInput)
		}
		r.p = Pipeline{ID: c.PipelineID, Target: c.Target}
		if err := checkNames(r.p); err != nil {
			return r, err
		}
		if len(c.Claim) > endpoint.MaxNameSize {
			return r, fmt.Errorf("%w: claim of %d bytes; at most %d are allowed", flightline.ErrInvalidInput, len(c.Claim), endpoint.MaxNameSize)
		}
		if c.Rejoin && c.Claim == "" {
			return r, fmt.Errorf("%w: DoPut command with rejoin but without claim", flightline.ErrInvalidInput)
		}
		r.claim = Claim{ID: c.Claim, Rejoin: c.Rejoin}
		if c.ResumeAfter == nil {
			return r, nil
		}
		expect, err := base64.StdEncoding.DecodeString(*c.ResumeAfter)
		if err != nil {
			return r, fmt.Errorf("%w: resume_after is not base64: %v", flightline.ErrInvalidInput, err)
		}
		if len(expect) == 0 {
			expect = nil
		}
		r.expect, r.check = expect, true
		return r, nil
	}
	return r, fmt.Errorf("%w: unsupported descriptor type %v", flightline.ErrInvalidInput, d.Type)
}
