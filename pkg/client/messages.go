package client

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/matememory/matememory/pkg/api"
	"net/http"
	"net/url"
	"strconv"
)

// Message is a conversation message to store. ToolCalls is the assistant's tool_calls array
// as the model returned it (OpenAI format); ToolCallID answers one of them (role "tool").
type Message struct {
	Role       string          `json:"role"`
	Content    string          `json:"content"`
	ToolCalls  json.RawMessage `json:"toolCalls,omitempty"`
	ToolCallID string          `json:"toolCallId,omitempty"`
	Name       string          `json:"name,omitempty"`
}

// StoredMessage is a message as MateMemory keeps it.
type StoredMessage = api.StoredMessage

// MessagePage is one page of a conversation's messages; HasMore says more messages follow
// the last one: ask again with its ID as afterID.
type MessagePage = api.MessagePage

func messagesPath(conversationID string) string {
	return "/api/v1/conversations/" + seg(conversationID) + "/messages"
}

// StoreMessages appends msgs, in order, to a conversation of agentID (at most 1000 in one
// call) and returns them as stored.
func (c *Client) StoreMessages(ctx context.Context, agentID int64, conversationID string, msgs ...Message) ([]StoredMessage, error) {
	if len(msgs) == 0 {
		return nil, errors.New("matememory: StoreMessages needs at least one message")
	}
	body := struct {
		AgentID  int64     `json:"agentId"`
		Messages []Message `json:"messages"`
	}{agentID, msgs}
	var out MessagePage
	_, err := c.do(ctx, request{method: http.MethodPost, path: messagesPath(conversationID), body: body}, &out)
	return out.Messages, err
}

// MessagesPage reads up to limit messages (0: the server's default, 1000) after the message
// with id afterID (0: from the start), oldest first.
func (c *Client) MessagesPage(ctx context.Context, agentID int64, conversationID string, afterID int64, limit int) (*MessagePage, error) {
	q := url.Values{"agentId": {strconv.FormatInt(agentID, 10)}}
	if afterID > 0 {
		q.Set("afterId", strconv.FormatInt(afterID, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out MessagePage
	if _, err := c.do(ctx, request{method: http.MethodGet, path: messagesPath(conversationID), query: q}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Messages reads all of a conversation's messages, oldest first, following pages.
func (c *Client) Messages(ctx context.Context, agentID int64, conversationID string) ([]StoredMessage, error) {
	var all []StoredMessage
	var after int64
	for {
		p, err := c.MessagesPage(ctx, agentID, conversationID, after, 0)
		if err != nil {
			return all, err
		}
		all = append(all, p.Messages...)
		if !p.HasMore || len(p.Messages) == 0 {
			return all, nil
		}
		after = p.Messages[len(p.Messages)-1].ID
	}
}
