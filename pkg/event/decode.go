package event

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
)

// DecodeCompletedMsg is DecodeCompleted for a message read from the stream. An event whose
// body has no eventId (a watermill publisher that carries the id only as the message UUID)
// takes it from the watermill UUID header, else from Nats-Msg-Id (without an "<agentId>:"
// prefix, should the id be scoped by agent): the id the stream deduplicated the message on.
func DecodeCompletedMsg(data []byte, h nats.Header) (*ConversationCompletedEvent, error) {
	var e ConversationCompletedEvent
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, invalidf("ConversationCompletedEvent is not valid JSON: %v", err)
	}
	if e.EventID == "" {
		e.EventID = headerID(h, e.AgentID)
	}
	if err := e.Validate(); err != nil {
		return nil, err
	}
	return &e, nil
}

func headerID(h nats.Header, agentID int64) string {
	for _, name := range []string{HeaderWatermillUUID, nats.MsgIdHdr} {
		if id := strings.TrimSpace(h.Get(name)); id != "" {
			return strings.TrimPrefix(id, strconv.FormatInt(agentID, 10)+":")
		}
	}
	return ""
}
