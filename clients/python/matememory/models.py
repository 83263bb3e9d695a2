"""MateMemory API models, generated from the served OpenAPI document by generate_models.py.

Do not edit: regenerate (pkg/internal/test/clients/clients_test.go fails when this file drifts).
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

__all__ = [
    'Agent',
    'AgentBody',
    'AgentPage',
    'Blame',
    'BlameLine',
    'BundleConflict',
    'BundleCounts',
    'BundleImportReport',
    'BusRetried',
    'ConversationMessage',
    'CronjobCreateBody',
    'CronjobJob',
    'CronjobJobDeleted',
    'CronjobJobList',
    'CronjobPatchBody',
    'CronjobReplaceBody',
    'Deleted',
    'EmergenceResult',
    'EnvelopeAgent',
    'EnvelopeAgentPage',
    'EnvelopeAny',
    'EnvelopeBlame',
    'EnvelopeBundleImportReport',
    'EnvelopeBusRetried',
    'EnvelopeCronjobJob',
    'EnvelopeCronjobJobDeleted',
    'EnvelopeCronjobJobList',
    'EnvelopeDeleted',
    'EnvelopeEmergenceResult',
    'EnvelopeErasureConversationReceipt',
    'EnvelopeErasureReceipt',
    'EnvelopeEventAck',
    'EnvelopeFileHistory',
    'EnvelopeFileList',
    'EnvelopeListMateClawFile',
    'EnvelopeListString',
    'EnvelopeListToolDefinition',
    'EnvelopeMapStringString',
    'EnvelopeMessages',
    'EnvelopeOverBudgetList',
    'EnvelopeRecallResult',
    'EnvelopeStatus',
    'EnvelopeSummarizerDeadLetters',
    'EnvelopeSummarizerPending',
    'EnvelopeSummarizerRunList',
    'EnvelopeSummarizerSummarizeResult',
    'EnvelopeSystemPrompt',
    'EnvelopeWindowResult',
    'EnvelopeWorkspaceFile',
    'EnvelopeWriteResult',
    'ErasureConversationReceipt',
    'ErasureDerivedVersion',
    'ErasureReceipt',
    'ErrorEnvelope',
    'EventAck',
    'EventConversationCompletedEvent',
    'EventMessage',
    'FileHistory',
    'FileList',
    'LedgerRun',
    'LineOrigin',
    'MateClawFile',
    'McpserverRPCError',
    'McpserverRPCErrorResponse',
    'MessageIn',
    'Messages',
    'MessagesBody',
    'OverBudgetList',
    'PatchBody',
    'PromptFilesBody',
    'PutBody',
    'RecallHit',
    'RecallResult',
    'RecallStated',
    'RollbackBody',
    'SearchBody',
    'Status',
    'SummarizeInputBody',
    'SummarizerDeadLetter',
    'SummarizerDeadLetters',
    'SummarizerPending',
    'SummarizerPendingConversation',
    'SummarizerPendingCooldown',
    'SummarizerPendingEvent',
    'SummarizerPendingLease',
    'SummarizerPendingWaiter',
    'SummarizerRunList',
    'SummarizerSummarizeResult',
    'SystemPrompt',
    'ToolDefinition',
    'ToolFunction',
    'WindowContextBody',
    'WindowFunctionCall',
    'WindowMessage',
    'WindowRecallInfo',
    'WindowRecallRequest',
    'WindowResult',
    'WindowTokens',
    'WindowToolCall',
    'WindowWorkspaceCut',
    'WorkspaceAgentBudgets',
    'WorkspaceAgentSummary',
    'WorkspaceFile',
    'WorkspaceHistoryEntry',
    'WorkspaceInfo',
    'WorkspaceOverBudget',
    'WriteResult',
]


class Agent(TypedDict):
    """The Agent schema."""
    agentId: int
    budgets: WorkspaceAgentBudgets
    createTime: str
    language: str
    timezone: str


class AgentBody(TypedDict):
    """The AgentBody schema."""
    language: NotRequired[Literal['zh', 'en']]
    "The language of the agent's files and prompts."
    memoryBudgetTokens: NotRequired[int]
    "MEMORY.md's token budget for this agent: 1 to 1000000, or 0 for the default (mate.memory.budget.memory-tokens)."
    profileBudgetTokens: NotRequired[int]
    "PROFILE.md's token budget for this agent: 1 to 1000000, or 0 for the default (mate.memory.budget.profile-tokens)."
    timezone: NotRequired[str]
    "An IANA time zone."


class AgentPage(TypedDict):
    """The AgentPage schema."""
    agents: list[WorkspaceAgentSummary]
    count: int
    nextAfter: NotRequired[int]


class Blame(TypedDict):
    """The Blame schema."""
    agentId: int
    count: int
    filename: str
    lines: list[BlameLine]
    version: int


class BlameLine(TypedDict):
    """The BlameLine schema."""
    confirmed: LineOrigin
    introduced: LineOrigin
    number: int
    text: str


class BundleConflict(TypedDict):
    """The BundleConflict schema."""
    bundleVersion: NotRequired[int]
    kind: str
    name: str
    "The filename, cron job name, run id, or \"settings\"."
    reason: str
    targetVersion: NotRequired[int]


class BundleCounts(TypedDict):
    """The BundleCounts schema."""
    agent: int
    cron: int
    file: int
    history: int
    message: int
    run: int


class BundleImportReport(TypedDict):
    """The BundleImportReport schema."""
    agentId: int
    changes: int
    "Created plus updated: 0 when the same bundle is imported again."
    conflictCount: int
    conflicts: list[BundleConflict]
    "The first 1000 conflicts."
    created: BundleCounts
    "Records written that the target did not have."
    dryRun: bool
    formatVersion: int
    mode: str
    records: BundleCounts
    "The records in the bundle."
    sourceAgentId: int
    "The agent the bundle was exported from."
    unchanged: BundleCounts
    "Records the target already held as they are."
    updated: BundleCounts
    "Files fast-forwarded to the bundle's newer version."


class BusRetried(TypedDict):
    """The BusRetried schema."""
    duplicate: bool
    seq: int
    stream: str
    subject: str


class ConversationMessage(TypedDict):
    """The ConversationMessage schema."""
    agentId: int
    content: str
    conversationId: str
    createTime: str
    id: int
    name: NotRequired[str]
    role: str
    toolCallId: NotRequired[str]
    toolCalls: NotRequired[Any]


class CronjobCreateBody(TypedDict):
    """The CronjobCreateBody schema."""
    agentId: int
    "The agent the job runs for."
    cronExpression: str
    "Five fields: minute hour day-of-month month day-of-week."
    enabled: NotRequired[bool]
    "Whether the job runs; true when absent (on create and replace)."
    name: str
    "Unique per agent."
    requestBody: NotRequired[str]
    "Kept with the job for MateClaw's clients."
    taskType: NotRequired[Literal['text', 'emergence']]
    "text (the default) sends triggerMessage to the agent; emergence runs the memory consolidation."
    timezone: NotRequired[str]
    "An IANA time zone; the agent's when absent (on create and replace)."
    triggerMessage: NotRequired[str]
    "The message the agent receives when the job fires; required for task type text."


class CronjobJob(TypedDict):
    """The CronjobJob schema."""
    agentId: int
    createTime: str
    cronExpression: str
    enabled: bool
    id: int
    lastRunTime: str | None
    name: str
    nextRunTime: str | None
    requestBody: str
    taskType: str
    timezone: str
    triggerMessage: str
    updateTime: str


class CronjobJobDeleted(TypedDict):
    """The CronjobJobDeleted schema."""
    deleted: bool
    id: int


class CronjobJobList(TypedDict):
    """The CronjobJobList schema."""
    count: int
    jobs: list[CronjobJob]


class CronjobPatchBody(TypedDict):
    """The CronjobPatchBody schema."""
    agentId: NotRequired[int]
    "The job's own agent, if sent: a job cannot move to another agent."
    cronExpression: NotRequired[str]
    enabled: NotRequired[bool]
    "Whether the job runs; true when absent (on create and replace)."
    name: NotRequired[str]
    requestBody: NotRequired[str]
    "Kept with the job for MateClaw's clients."
    taskType: NotRequired[Literal['text', 'emergence']]
    "text (the default) sends triggerMessage to the agent; emergence runs the memory consolidation."
    timezone: NotRequired[str]
    "An IANA time zone; the agent's when absent (on create and replace)."
    triggerMessage: NotRequired[str]
    "The message the agent receives when the job fires; required for task type text."


class CronjobReplaceBody(TypedDict):
    """The CronjobReplaceBody schema."""
    agentId: NotRequired[int]
    "The job's own agent, if sent: a job cannot move to another agent."
    cronExpression: str
    enabled: NotRequired[bool]
    "Whether the job runs; true when absent (on create and replace)."
    name: str
    requestBody: NotRequired[str]
    "Kept with the job for MateClaw's clients."
    taskType: NotRequired[Literal['text', 'emergence']]
    "text (the default) sends triggerMessage to the agent; emergence runs the memory consolidation."
    timezone: NotRequired[str]
    "An IANA time zone; the agent's when absent (on create and replace)."
    triggerMessage: NotRequired[str]
    "The message the agent receives when the job fires; required for task type text."


class Deleted(TypedDict):
    """The Deleted schema."""
    agentId: int
    deleted: bool
    filename: str


class EmergenceResult(TypedDict):
    """The EmergenceResult schema."""
    reason: NotRequired[str]
    requestId: str
    runId: NotRequired[str]
    runStatus: NotRequired[str]
    status: str


class EnvelopeAgent(TypedDict):
    """The EnvelopeAgent schema."""
    code: int
    "The HTTP status code, repeated."
    data: Agent
    msg: NotRequired[str]
    "Empty on success."


class EnvelopeAgentPage(TypedDict):
    """The EnvelopeAgentPage schema."""
    code: int
    "The HTTP status code, repeated."
    data: AgentPage
    msg: NotRequired[str]
    "Empty on success."


class EnvelopeAny(TypedDict):
    """The EnvelopeAny schema."""
    code: int
    "The HTTP status code, repeated."
    data: Any
    msg: NotRequired[str]
    "Empty on success."


class EnvelopeBlame(TypedDict):
    """The EnvelopeBlame schema."""
    code: int
    "The HTTP status code, repeated."
    data: Blame
    msg: NotRequired[str]
    "Empty on success."


class EnvelopeBundleImportReport(TypedDict):
    """The EnvelopeBundleImportReport schema."""
    code: int
    "The HTTP status code, repeated."
    data: BundleImportReport
    msg: NotRequired[str]
    "Empty on success."


class EnvelopeBusRetried(TypedDict):
    """The EnvelopeBusRetried schema."""
    code: int
    "The HTTP status code, repeated."
    data: BusRetried
    msg: NotRequired[str]
    "Empty on success."


class EnvelopeCronjobJob(TypedDict):
    """The EnvelopeCronjobJob schema."""
    code: int
    "The HTTP status code, repeated."
    data: CronjobJob
    msg: NotRequired[str]
    "Empty on success."


class EnvelopeCronjobJobDeleted(TypedDict):
    """The EnvelopeCronjobJobDeleted schema."""
    code: int
    "The HTTP status code, repeated."
    data: CronjobJobDeleted
    msg: NotRequired[str]
    "Empty on success."


class EnvelopeCronjobJobList(TypedDict):
    """The EnvelopeCronjobJobList schema."""
    code: int
    "The HTTP status code, repeated."
    data: CronjobJobList
    msg: NotRequired[str]
    "Empty on success."


class EnvelopeDeleted(TypedDict):
    """The EnvelopeDeleted schema."""
    code: int
    "The HTTP status code, repeated."
    data: Deleted
    msg: NotRequired[str]
    "Empty on success."


class EnvelopeEmergenceResult(TypedDict):
    """The EnvelopeEmergenceResult schema."""
    code: int
    "The HTTP status code, repeated."
    data: EmergenceResult
    msg: NotRequired[str]
    "Empty on success."


class EnvelopeErasureConversationReceipt(TypedDict):
    """The EnvelopeErasureConversationReceipt schema."""
    code: int
    "The HTTP status code, repeated."
    data: ErasureConversationReceipt
    msg: NotRequired[str]
    "Empty on success."


class EnvelopeErasureReceipt(TypedDict):
    """The EnvelopeErasureReceipt schema."""
    code: int
    "The HTTP status code, repeated."
    data: ErasureReceipt
    msg: NotRequired[str]
    "Empty on success."


class EnvelopeEventAck(TypedDict):
    """The EnvelopeEventAck schema."""
    code: int
    "The HTTP status code, repeated."
    data: EventAck
    msg: NotRequired[str]
    "Empty on success."


class EnvelopeFileHistory(TypedDict):
    """The EnvelopeFileHistory schema."""
    code: int
    "The HTTP status code, repeated."
    data: FileHistory
    msg: NotRequired[str]
    "Empty on success."


class EnvelopeFileList(TypedDict):
    """The EnvelopeFileList schema."""
    code: int
    "The HTTP status code, repeated."
    data: FileList
    msg: NotRequired[str]
    "Empty on success."


class EnvelopeListMateClawFile(TypedDict):
    """The EnvelopeListMateClawFile schema."""
    code: int
    "The HTTP status code, repeated."
    data: list[MateClawFile]
    msg: NotRequired[str]
    "Empty on success."


class EnvelopeListString(TypedDict):
    """The EnvelopeListString schema."""
    code: int
    "The HTTP status code, repeated."
    data: list[str]
    msg: NotRequired[str]
    "Empty on success."


class EnvelopeListToolDefinition(TypedDict):
    """The EnvelopeListToolDefinition schema."""
    code: int
    "The HTTP status code, repeated."
    data: list[ToolDefinition]
    msg: NotRequired[str]
    "Empty on success."


class EnvelopeMapStringString(TypedDict):
    """The EnvelopeMapStringString schema."""
    code: int
    "The HTTP status code, repeated."
    data: dict[str, str]
    msg: NotRequired[str]
    "Empty on success."


class EnvelopeMessages(TypedDict):
    """The EnvelopeMessages schema."""
    code: int
    "The HTTP status code, repeated."
    data: Messages
    msg: NotRequired[str]
    "Empty on success."


class EnvelopeOverBudgetList(TypedDict):
    """The EnvelopeOverBudgetList schema."""
    code: int
    "The HTTP status code, repeated."
    data: OverBudgetList
    msg: NotRequired[str]
    "Empty on success."


class EnvelopeRecallResult(TypedDict):
    """The EnvelopeRecallResult schema."""
    code: int
    "The HTTP status code, repeated."
    data: RecallResult
    msg: NotRequired[str]
    "Empty on success."


class EnvelopeStatus(TypedDict):
    """The EnvelopeStatus schema."""
    code: int
    "The HTTP status code, repeated."
    data: Status
    msg: NotRequired[str]
    "Empty on success."


class EnvelopeSummarizerDeadLetters(TypedDict):
    """The EnvelopeSummarizerDeadLetters schema."""
    code: int
    "The HTTP status code, repeated."
    data: SummarizerDeadLetters
    msg: NotRequired[str]
    "Empty on success."


class EnvelopeSummarizerPending(TypedDict):
    """The EnvelopeSummarizerPending schema."""
    code: int
    "The HTTP status code, repeated."
    data: SummarizerPending
    msg: NotRequired[str]
    "Empty on success."


class EnvelopeSummarizerRunList(TypedDict):
    """The EnvelopeSummarizerRunList schema."""
    code: int
    "The HTTP status code, repeated."
    data: SummarizerRunList
    msg: NotRequired[str]
    "Empty on success."


class EnvelopeSummarizerSummarizeResult(TypedDict):
    """The EnvelopeSummarizerSummarizeResult schema."""
    code: int
    "The HTTP status code, repeated."
    data: SummarizerSummarizeResult
    msg: NotRequired[str]
    "Empty on success."


class EnvelopeSystemPrompt(TypedDict):
    """The EnvelopeSystemPrompt schema."""
    code: int
    "The HTTP status code, repeated."
    data: SystemPrompt
    msg: NotRequired[str]
    "Empty on success."


class EnvelopeWindowResult(TypedDict):
    """The EnvelopeWindowResult schema."""
    code: int
    "The HTTP status code, repeated."
    data: WindowResult
    msg: NotRequired[str]
    "Empty on success."


class EnvelopeWorkspaceFile(TypedDict):
    """The EnvelopeWorkspaceFile schema."""
    code: int
    "The HTTP status code, repeated."
    data: WorkspaceFile
    msg: NotRequired[str]
    "Empty on success."


class EnvelopeWriteResult(TypedDict):
    """The EnvelopeWriteResult schema."""
    code: int
    "The HTTP status code, repeated."
    data: WriteResult
    msg: NotRequired[str]
    "Empty on success."


class ErasureConversationReceipt(TypedDict):
    """The ErasureConversationReceipt schema."""
    actor: str
    agentId: int
    conversationId: str
    derived: list[ErasureDerivedVersion]
    erasedAt: str
    messages: dict[str, int]
    rows: dict[str, int]


class ErasureDerivedVersion(TypedDict):
    """The ErasureDerivedVersion schema."""
    action: str
    filename: str
    runId: str
    version: NotRequired[int]


class ErasureReceipt(TypedDict):
    """The ErasureReceipt schema."""
    actor: str
    agentId: int
    erasedAt: str
    kept: list[str]
    mcpSessions: int
    messages: dict[str, int]
    rows: dict[str, int]
    vacuumed: NotRequired[bool]


class ErrorEnvelope(TypedDict):
    """The ErrorEnvelope schema."""
    code: int
    "The HTTP status code, repeated."
    msg: str
    "What was wrong and, where it helps, what to do."


class EventAck(TypedDict):
    """The EventAck schema."""
    duplicate: bool
    eventId: str
    seq: int
    stream: str


class EventConversationCompletedEvent(TypedDict):
    """The EventConversationCompletedEvent schema."""
    agentId: int
    assistantReply: NotRequired[str | None]
    conversationId: str
    eventId: NotRequired[str | None]
    "Filled in by the server when absent."
    finishReason: NotRequired[str | None]
    messageCount: NotRequired[int | None]
    messages: NotRequired[list[EventMessage] | None]
    occurredAt: NotRequired[str | None]
    "Filled in by the server when absent."
    triggerSource: NotRequired[str | None]
    turnStatus: NotRequired[str | None]
    userMessage: NotRequired[str | None]


class EventMessage(TypedDict):
    """The EventMessage schema."""
    content: NotRequired[str | None]
    name: NotRequired[str | None]
    role: str
    toolCallId: NotRequired[str | None]
    toolCalls: NotRequired[Any]


class FileHistory(TypedDict):
    """The FileHistory schema."""
    agentId: int
    count: int
    filename: str
    history: list[WorkspaceHistoryEntry]


class FileList(TypedDict):
    """The FileList schema."""
    agentId: int
    count: int
    files: list[WorkspaceInfo]


class LedgerRun(TypedDict):
    """The LedgerRun schema."""
    agentId: int
    attempt: int
    conversations: list[str]
    createTime: str
    eventId: NotRequired[str]
    filesChanged: list[str]
    kind: str
    latencyMs: int
    model: NotRequired[str]
    provider: NotRequired[str]
    reason: NotRequired[str]
    runId: str
    status: str
    tokensIn: int
    tokensOut: int


class LineOrigin(TypedDict):
    """The LineOrigin schema."""
    action: NotRequired[str]
    actor: NotRequired[str]
    conversations: NotRequired[list[str]]
    eventId: NotRequired[str]
    ref: NotRequired[str]
    runKind: NotRequired[str]
    time: str
    version: int


class MateClawFile(TypedDict):
    """The MateClawFile schema."""
    agentId: int
    content: str | None
    deleted: int
    enabled: bool
    fileSize: int
    filename: str
    sortOrder: int
    updateTime: str
    version: int


class McpserverRPCError(TypedDict):
    """The McpserverRPCError schema."""
    code: int
    "-32700 parse error, -32600 invalid request (the transport's refusals too), -32601 method not found, -32602 invalid params."
    message: str
    "What was wrong."


class McpserverRPCErrorResponse(TypedDict):
    """The McpserverRPCErrorResponse schema."""
    error: McpserverRPCError
    id: str | int | None
    "The request's id; null when the body held no single request whose id could be read."
    jsonrpc: Literal['2.0']


class MessageIn(TypedDict):
    """The MessageIn schema."""
    agentId: NotRequired[int]
    "The agent (required at the top level; in a batch, optional and equal to it)."
    content: NotRequired[str]
    name: NotRequired[str]
    role: NotRequired[Literal['user', 'assistant', 'system', 'tool']]
    "Required for each message."
    toolCallId: NotRequired[str]
    "A tool message's call id."
    toolCalls: NotRequired[Any]
    "An assistant message's OpenAI tool calls (a JSON array)."


class Messages(TypedDict):
    """The Messages schema."""
    agentId: int
    conversationId: str
    count: int
    hasMore: bool
    messages: list[ConversationMessage]


class MessagesBody(TypedDict):
    """The MessagesBody schema."""
    agentId: NotRequired[int]
    "The agent (required at the top level; in a batch, optional and equal to it)."
    content: NotRequired[str]
    messages: NotRequired[list[MessageIn] | None]
    "A batch, instead of the single message's fields."
    name: NotRequired[str]
    role: NotRequired[Literal['user', 'assistant', 'system', 'tool']]
    "Required for each message."
    toolCallId: NotRequired[str]
    "A tool message's call id."
    toolCalls: NotRequired[Any]
    "An assistant message's OpenAI tool calls (a JSON array)."


class OverBudgetList(TypedDict):
    """The OverBudgetList schema."""
    count: int
    files: list[WorkspaceOverBudget]


class PatchBody(TypedDict):
    """The PatchBody schema."""
    enabled: NotRequired[bool]
    "Whether the file is injected into the system prompt."
    sortOrder: NotRequired[int]
    "The file's place in the injection (ascending)."


class PromptFilesBody(TypedDict):
    """The PromptFilesBody schema."""
    files: list[str]
    "The files to inject, in order (an empty list disables every file)."


class PutBody(TypedDict):
    """The PutBody schema."""
    content: str
    "The file's new content (at most the workspace's file size limit)."


class RecallHit(TypedDict):
    """The RecallHit schema."""
    coverage: float
    date: str
    dated: bool
    decay: float
    endLine: int
    exact: NotRequired[float]
    fileVersion: int
    filename: str
    heading: NotRequired[str]
    lexical: float
    relevance: float
    score: float
    snippet: str
    source: str
    startLine: int
    stated: NotRequired[RecallStated]
    supersededBy: NotRequired[str]
    vector: float


class RecallResult(TypedDict):
    """The RecallResult schema."""
    agentId: int
    confident: bool
    degraded: bool
    hits: list[RecallHit]
    mode: str
    notice: NotRequired[str]
    query: str
    searched: int


class RecallStated(TypedDict):
    """The RecallStated schema."""
    days: int
    files: NotRequired[list[str]]
    latest: str


class RollbackBody(TypedDict):
    """The RollbackBody schema."""
    version: int
    "A previous version from …/history."


class SearchBody(TypedDict):
    """The SearchBody schema."""
    filenamePrefix: NotRequired[str]
    "Only files whose name starts with this."
    maxResults: NotRequired[int]
    "At most this many hits (default 6)."
    minRelevance: NotRequired[float]
    "Only hits whose relevance is at least this (0.5 and above: confident). Omitted: every matching hit, ranked."
    query: str
    "What to look for."
    since: NotRequired[str]
    "Only notes dated on or after this day (YYYY-MM-DD)."
    until: NotRequired[str]
    "Only notes dated on or before this day (YYYY-MM-DD)."


class Status(TypedDict):
    """The Status schema."""
    status: str


class SummarizeInputBody(TypedDict):
    """The SummarizeInputBody schema."""
    force: NotRequired[bool]
    "The same as ?force=true."


class SummarizerDeadLetter(TypedDict):
    """The SummarizerDeadLetter schema."""
    consumer: NotRequired[str]
    deliveries: NotRequired[int]
    msgId: NotRequired[str]
    payload: Any
    reason: str
    seq: int
    stream: NotRequired[str]
    streamSeq: NotRequired[int]
    subject: str
    time: str


class SummarizerDeadLetters(TypedDict):
    """The SummarizerDeadLetters schema."""
    count: int
    deadLetters: list[SummarizerDeadLetter]


class SummarizerPending(TypedDict):
    """The SummarizerPending schema."""
    agentId: int
    coalesced: list[SummarizerPendingEvent]
    "Events acknowledged into the agent's next extraction during the cooldown; their ledger rows are written by that extraction."
    conversations: list[SummarizerPendingConversation]
    "Conversations with messages not yet extracted (the agent's next extraction covers them), oldest first, at most 100."
    cooldown: NotRequired[SummarizerPendingCooldown]
    "The agent's extraction cooldown (absent when none runs)."
    lease: NotRequired[SummarizerPendingLease]
    "Who holds the agent's lease (absent when free)."
    moreConversations: NotRequired[bool]
    now: str
    state: Literal['leased', 'idle', 'cooldown', 'waiting', 'stranded', 'queued']
    "The first that applies: leased (a worker holds the agent's lease), idle (nothing waits), cooldown (the cooldown runs; its waiter extracts everything after it), waiting (the cooldown is over; the waiter's redelivery is due), stranded (events coalesced behind a waiter that did not come back: the stranded sweep or the next event extracts them), queued (messages not yet extracted and nothing in the agent's record holds them)."
    summary: str
    "Why the agent's conversations are not extracted yet, in a sentence."
    waiter: NotRequired[SummarizerPendingWaiter]
    "The one delivery waiting for the cooldown's end (absent when none)."


class SummarizerPendingConversation(TypedDict):
    """The SummarizerPendingConversation schema."""
    conversationId: str
    extractedThrough: int
    "Messages up to this id are extracted (0: none yet)."
    lastMessageId: int
    messages: int
    "Messages above the watermark."
    since: str
    "When its oldest message not yet extracted was stored."


class SummarizerPendingCooldown(TypedDict):
    """The SummarizerPendingCooldown schema."""
    runId: NotRequired[str]
    "The run that started it."
    until: str
    "When the agent's next LLM extraction may start."


class SummarizerPendingEvent(TypedDict):
    """The SummarizerPendingEvent schema."""
    conversationId: str
    eventId: str


class SummarizerPendingLease(TypedDict):
    """The SummarizerPendingLease schema."""
    acquired: str
    expires: str
    "When the lease ends unless its holder renews it."
    owner: str
    "The worker: its part, host and process id."
    purpose: str
    "summarize or emergence."


class SummarizerPendingWaiter(TypedDict):
    """The SummarizerPendingWaiter schema."""
    eventId: str
    expectedBy: str
    "When it is expected back by (the cooldown's end plus the ack wait and a minute)."
    overdue: bool
    "It did not come back in time (dead-lettered, or its worker died): the next event or the stranded sweep extracts what waits behind it."


class SummarizerRunList(TypedDict):
    """The SummarizerRunList schema."""
    agentId: int
    count: int
    runs: list[LedgerRun]


class SummarizerSummarizeResult(TypedDict):
    """The SummarizerSummarizeResult schema."""
    noWorker: NotRequired[bool]
    "No summarizer worker is running."
    reason: str
    requestId: str
    runId: NotRequired[str]
    seq: NotRequired[int]
    status: Literal['completed', 'skipped', 'refused', 'pending']
    "pending (202): the request stays queued; its outcome will be in the run ledger under requestId."


class SystemPrompt(TypedDict):
    """The SystemPrompt schema."""
    agentId: int
    content: str


class ToolDefinition(TypedDict):
    """The ToolDefinition schema."""
    function: ToolFunction
    type: str


class ToolFunction(TypedDict):
    """The ToolFunction schema."""
    description: str
    name: str
    parameters: Any


class WindowContextBody(TypedDict):
    """The WindowContextBody schema."""
    maxInputTokens: NotRequired[int]
    "The input budget; 0 or absent for the default."
    messages: NotRequired[list[WindowMessage]]
    "Inline OpenAI-format history; omit it to use the stored messages."
    model: NotRequired[str]
    "Picks the tokenizer and the default budget."
    recall: NotRequired[WindowRecallRequest]
    "Put memory search hits in the system message."
    systemPrompt: NotRequired[str]
    "The chat service's own system prompt; the workspace files follow it."
    userMessage: str
    "The current user message, placed last."


class WindowFunctionCall(TypedDict):
    """The WindowFunctionCall schema."""
    arguments: str
    name: str


class WindowMessage(TypedDict):
    """The WindowMessage schema."""
    content: NotRequired[str | None]
    name: NotRequired[str]
    role: str
    tool_call_id: NotRequired[str]
    tool_calls: NotRequired[list[WindowToolCall] | None]


class WindowRecallInfo(TypedDict):
    """The WindowRecallInfo schema."""
    degraded: NotRequired[bool]
    hits: int
    included: int
    mode: NotRequired[str]
    notice: NotRequired[str]
    query: str
    sources: NotRequired[list[RecallHit]]
    tokens: int


class WindowRecallRequest(TypedDict):
    """The WindowRecallRequest schema."""
    maxTokens: NotRequired[int]
    "Filled in by the server when absent."
    query: NotRequired[str]
    "Filled in by the server when absent."
    topK: NotRequired[int]
    "Filled in by the server when absent."


class WindowResult(TypedDict):
    """The WindowResult schema."""
    cacheHit: bool
    compacted: bool
    currentFromHistory: NotRequired[bool]
    degraded: bool
    degradedReason: NotRequired[str]
    emergency: NotRequired[bool]
    exact: bool
    flushId: NotRequired[str]
    flushReason: NotRequired[str]
    flushRequested: bool
    historyMessages: int
    historyRead: int
    historySource: str
    kept: int
    language: str
    llmCalls: int
    messages: list[WindowMessage]
    model: NotRequired[str]
    recall: NotRequired[WindowRecallInfo]
    skippedMessages: NotRequired[int]
    summarized: int
    summaryKind: NotRequired[str]
    tokenizer: str
    tokens: WindowTokens
    trimmed: int
    warnings: NotRequired[list[str]]
    workspaceCut: NotRequired[list[WindowWorkspaceCut]]


class WindowTokens(TypedDict):
    """The WindowTokens schema."""
    before: int
    budget: int
    current: int
    history: int
    priming: int
    recall: NotRequired[int]
    summary: int
    system: int
    total: int
    trigger: int
    workspace: int


class WindowToolCall(TypedDict):
    """The WindowToolCall schema."""
    function: WindowFunctionCall
    id: str
    type: str


class WindowWorkspaceCut(TypedDict):
    """The WindowWorkspaceCut schema."""
    filename: str
    keptLines: int
    keptTokens: int
    lines: int
    tokens: int


class WorkspaceAgentBudgets(TypedDict):
    """The WorkspaceAgentBudgets schema."""
    memoryOverridden: bool
    memoryTokens: int
    profileOverridden: bool
    profileTokens: int


class WorkspaceAgentSummary(TypedDict):
    """The WorkspaceAgentSummary schema."""
    agentId: int
    createTime: str
    fileCount: int
    language: str
    lastUpdate: str
    timezone: str


class WorkspaceFile(TypedDict):
    """The WorkspaceFile schema."""
    agentId: int
    budgetTokens: NotRequired[int]
    content: str
    createTime: str
    enabled: bool
    fileSize: int
    filename: str
    sortOrder: int
    tokens: NotRequired[int]
    updateTime: str
    version: int


class WorkspaceHistoryEntry(TypedDict):
    """The WorkspaceHistoryEntry schema."""
    action: str
    actor: str
    content: str
    enabled: bool
    fileSize: int
    ref: str
    replacedAt: str
    version: int


class WorkspaceInfo(TypedDict):
    """The WorkspaceInfo schema."""
    budgetTokens: NotRequired[int]
    enabled: bool
    fileSize: int
    filename: str
    sortOrder: int
    tokens: NotRequired[int]
    updateTime: str
    version: int


class WorkspaceOverBudget(TypedDict):
    """The WorkspaceOverBudget schema."""
    agentId: int
    budgetTokens: int
    filename: str
    tokens: int
    updateTime: str
    version: int


class WriteResult(TypedDict):
    """The WriteResult schema."""
    agentId: int
    budgetTokens: NotRequired[int]
    content: str
    createTime: str
    created: bool
    enabled: bool
    fileSize: int
    filename: str
    sortOrder: int
    tokens: NotRequired[int]
    updateTime: str
    version: int
