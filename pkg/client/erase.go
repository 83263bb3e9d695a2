package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/matememory/matememory/pkg/api"
)

// ErasureReceipt is what an agent's erasure removed: counts per store, no content.
type ErasureReceipt = api.ErasureReceipt

// ConversationErasureReceipt is what a conversation's erasure removed, and the memory file
// versions the runs that covered it wrote, for a person to review.
type ConversationErasureReceipt = api.ErasureConversationReceipt

// DerivedVersion is a memory file a run that covered an erased conversation changed, and the
// version it wrote (0 when history does not say: the run created the file).
type DerivedVersion = api.ErasureDerivedVersion

// EraseAgent erases every trace of the agent from every store (DELETE
// /api/v1/agents/{agentId}?erase=true&confirm={agentId}; irreversible) and returns the
// receipt. It needs the agent's own key or an admin key (ErrForbidden otherwise); an
// extraction holding the agent's lease is ErrConflict (try again later). Repeating an
// erasure removes nothing more, so it is retried as a GET is.
func (c *Client) EraseAgent(ctx context.Context, agentID int64) (*ErasureReceipt, error) {
	var out ErasureReceipt
	q := url.Values{"erase": {"true"}, "confirm": {itoa(agentID)}}
	if _, err := c.do(ctx, request{method: http.MethodDelete, path: agentPath(agentID), query: q, retrySafe: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// EraseConversation erases one conversation of the agent (its messages, watermark, recall
// chunks, context summaries, the ledger rows of the runs that covered it and its events on
// the streams; irreversible) and returns the receipt, whose Derived lists the memory file
// versions those runs wrote. Retried as EraseAgent is.
func (c *Client) EraseConversation(ctx context.Context, agentID int64, conversationID string) (*ConversationErasureReceipt, error) {
	var out ConversationErasureReceipt
	q := url.Values{"erase": {"true"}, "confirm": {conversationID}}
	path := agentPath(agentID) + "/conversations/" + seg(conversationID)
	if _, err := c.do(ctx, request{method: http.MethodDelete, path: path, query: q, retrySafe: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
