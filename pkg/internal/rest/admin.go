package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/danielgtaylor/huma/v2"
	"github.com/matememory/matememory/pkg/api"
	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/httpapi"
	"github.com/matememory/matememory/pkg/internal/tracing"
	"github.com/nats-io/nats.go/jetstream"
	"net/http"
	"strings"
)

// Admin routes: operator endpoints, answered only for an admin key (which reaches no
// agent's memory): the core files over their budgets (registered with the workspace
// routes) and the dead letters, over the bus's dead-letter stream.

// RegisterDeadLetters adds the dead-letter operations: the list and the retry, read from and
// published through JetStream (js); t starts the producer span of a retry.
func RegisterDeadLetters(s *httpapi.Server, js jetstream.JetStream, t tracing.Messaging) {
	h := deadLetterHandlers{js: js, tracing: t}
	admin := []string{"Admin"}
	httpapi.Register(s, huma.Operation{Method: http.MethodGet, Path: "/api/v1/admin/dlq", OperationID: "listDeadLetters", Tags: admin,
		Summary: "Dead letters, oldest first (admin key)", Errors: []int{403, 503}}, h.listDLQ)
	httpapi.Register(s, huma.Operation{Method: http.MethodPost, Path: "/api/v1/admin/dlq/{seq}/retry", OperationID: "retryDeadLetter", Tags: admin,
		Summary:     "Publish a dead letter again on its original subject (admin key)",
		Description: "Removes it from the dead-letter stream once published.", DefaultStatus: http.StatusAccepted,
		Errors: []int{403, 404, 503}}, h.retryDLQ)
}

type deadLetterHandlers struct {
	js      jetstream.JetStream
	tracing tracing.Messaging
}

// DeadLetters is a page of dead letters.
type DeadLetters struct {
	Count       int              `json:"count"`
	DeadLetters []api.DeadLetter `json:"deadLetters"`
}

type dlqInput struct {
	After   uint64 `query:"after" doc:"Only dead letters after this sequence number."`
	Limit   int    `query:"limit" minimum:"1" maximum:"1000" default:"100"`
	Subject string `query:"subject" example:"mate.events.conversation.completed" doc:"Only dead letters of this original subject (or pattern)."`
}

func (h deadLetterHandlers) listDLQ(ctx context.Context, in *dlqInput) (*httpapi.Response[DeadLetters], error) {
	if err := httpapi.Admin(ctx); err != nil {
		return nil, err
	}
	limit := in.Limit
	if limit == 0 {
		limit = 100
	}
	subject := in.Subject
	if subject != "" && !strings.HasPrefix(subject, bus.SubjectDeadLetter+".") {
		subject = bus.DeadLetterSubject(subject)
	}
	list, err := bus.ListDeadLetters(ctx, h.js, in.After, subject, limit)
	if err != nil {
		return nil, &httpapi.Error{Status: http.StatusServiceUnavailable, Msg: "read dead letters: " + err.Error(), Err: err}
	}
	out := make([]api.DeadLetter, len(list))
	for i, e := range list {
		payload := json.RawMessage(e.Data)
		if !json.Valid(e.Data) {
			payload = textJSON(string(e.Data))
		}
		out[i] = api.DeadLetter{Payload: payload, DeadLetterInfo: api.DeadLetterInfo{Seq: e.Seq, Subject: e.Subject, Reason: e.Reason,
			Stream: e.Stream, StreamSeq: e.StreamSeq, Consumer: e.Consumer, Deliveries: e.Deliveries, MsgID: e.MsgID, Time: e.Time}}
	}
	return httpapi.OK(DeadLetters{Count: len(out), DeadLetters: out}), nil
}

type retryInput struct {
	Seq int64 `path:"seq" minimum:"1" doc:"The dead letter's sequence number in the dead-letter stream."`
}

func (h deadLetterHandlers) retryDLQ(ctx context.Context, in *retryInput) (*httpapi.Response[api.RetriedLetter], error) {
	if err := httpapi.Admin(ctx); err != nil {
		return nil, err
	}
	res, err := bus.RetryDeadLetter(ctx, h.js, uint64(in.Seq), tracing.With(h.tracing))
	if errors.Is(err, bus.ErrDeadLetterNotFound) {
		return nil, httpapi.Errorf(http.StatusNotFound, "no dead letter with seq %d (already retried?)", in.Seq)
	}
	if err != nil {
		return nil, &httpapi.Error{Status: http.StatusServiceUnavailable, Msg: err.Error(), Err: err}
	}
	return httpapi.Answer(http.StatusAccepted, res), nil
}

type overBudgetInput struct {
	Limit int `query:"limit" minimum:"1" maximum:"1000" default:"100" doc:"At most this many files."`
}

// OverBudgetList is the core files over their budgets.
type OverBudgetList struct {
	Count int              `json:"count"`
	Files []api.OverBudget `json:"files"`
}

func (h wsHandlers) overBudget(ctx context.Context, in *overBudgetInput) (*httpapi.Response[OverBudgetList], error) {
	if err := httpapi.Admin(ctx); err != nil {
		return nil, err
	}
	files, err := h.ws.ListOverBudget(ctx, in.Limit)
	if err != nil {
		return nil, err
	}
	return httpapi.OK(OverBudgetList{Count: len(files), Files: files}), nil
}

// textJSON is s as a JSON string, written as the API writes strings (no HTML escaping).
func textJSON(s string) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
