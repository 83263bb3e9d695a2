package event

import (
	"encoding/json"
	"strconv"
	"strings"
)

// headerMsgID is JetStream's deduplication header (nats.MsgIdHdr).
const headerMsgID = "Nats-Msg-Id"

// DecodeCompletedMsg is DecodeCompleted for a message read from the stream. An event whose
// body has no eventId (a watermill publisher that carries the id only as the message UUID)
// takes it from the watermill UUID header, else from Nats-Msg-Id (without an "<agentId>:"
// prefix, should the id be scoped by agent): the id the stream deduplicated the message on.
//
// h is the message's headers (a nats.Header converts implicitly); the package stays free of
// the NATS client.
func DecodeCompletedMsg(data []byte, h map[string][]string) (*ConversationCompletedEvent, error) {
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

func headerID(h map[string][]string, agentID int64) string {
	for _, name := range []string{HeaderWatermillUUID, headerMsgID} {
		if v := h[name]; len(v) > 0 && strings.TrimSpace(v[0]) != "" {
			id := strings.TrimSpace(v[0])
			return strings.TrimPrefix(id, strconv.FormatInt(agentID, 10)+":")
		}
	}
	return ""
}
