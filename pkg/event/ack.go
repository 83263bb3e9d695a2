package event

import "strconv"

// Ack is JetStream's confirmation that an event is stored.
type Ack struct {
	EventID string `json:"eventId"`
	Stream  string `json:"stream"`
	Seq     uint64 `json:"seq"`
	// Duplicate is true when an event with this id was already stored (nothing new stored).
	Duplicate bool `json:"duplicate"`
}

// Header names set on published events. HeaderWatermillUUID makes an event readable by a
// watermill-nats subscriber (its NATSMarshaler takes the message UUID from it).
const (
	HeaderWatermillUUID = "_watermill_message_uuid"
	HeaderContentType   = "Content-Type"
)

// MsgID is the JetStream message id (Nats-Msg-Id) of an event or summarize request:
// "<agentId>:<id>". The stream deduplicates on it, so the id a client picks is unique per
// agent only: two agents using the same event id never swallow each other's events.
// Anyone publishing on the stream without this package must set the same header.
func MsgID(agentID int64, id string) string {
	return strconv.FormatInt(agentID, 10) + ":" + id
}
