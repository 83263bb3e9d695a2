package console

import (
	"net/http"
	"strings"
	"time"
)

// lang is the language a page is rendered in: "en" or "zh".
type lang string

// languageOf maps a mate.language value ("zh-CN", "en") to a console language.
func languageOf(s string) lang {
	if strings.HasPrefix(strings.ToLower(s), "zh") {
		return "zh"
	}
	return "en"
}

// lang is the caller's choice (cookie), else mate.language.
func (c *Console) lang(r *http.Request) lang {
	if ck, err := r.Cookie(langCookie); err == nil && (ck.Value == "en" || ck.Value == "zh") {
		return lang(ck.Value)
	}
	return languageOf(c.d.Language)
}

// T translates key; a key missing in Chinese falls back to English, a missing key shows
// itself (a test checks every key has both).
func (l lang) T(key string) string {
	if l == "zh" {
		if s, ok := zh[key]; ok {
			return s
		}
	}
	if s, ok := en[key]; ok {
		return s
	}
	return key
}

// Time formats t for a page (UTC, minutes).
func (l lang) Time(t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	return t.UTC().Format("2006-01-02 15:04:05") + " UTC"
}

func (l lang) HTMLLang() string {
	if l == "zh" {
		return "zh-CN"
	}
	return "en"
}

// setLang switches the language (a cookie; no session needed, still same-origin only).
func (c *Console) setLang(w http.ResponseWriter, r *http.Request) {
	l := r.PostFormValue("lang")
	if l != "en" && l != "zh" {
		l = string(languageOf(c.d.Language))
	}
	http.SetCookie(w, &http.Cookie{Name: langCookie, Value: l, Path: Prefix + "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: 365 * 24 * 3600})
	next := r.PostFormValue("next")
	if !strings.HasPrefix(next, Prefix+"/") || strings.HasPrefix(next, "//") {
		next = Prefix + "/"
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

var en = map[string]string{
	"title":             "MateMemory console",
	"nav.agents":        "Agents",
	"nav.cron":          "Cron jobs",
	"nav.ops":           "Operations",
	"nav.signout":       "Sign out",
	"nav.skip":          "Skip to content",
	"lang.switch":       "中文",
	"signin.title":      "Sign in",
	"signin.key":        "API key",
	"signin.help":       "The same key as for the REST API (mate.auth.keys). An agent key shows its agents; admin pages need the admin scope.",
	"signin.submit":     "Sign in",
	"signin.bad":        "That API key is not valid.",
	"signin.open":       "No API keys are configured: the console is open on loopback only.",
	"agents.title":      "Agents",
	"agents.none":       "No agents yet. An agent appears when it first writes memory or sends an event.",
	"agents.id":         "Agent",
	"agents.language":   "Language",
	"agents.timezone":   "Time zone",
	"agents.files":      "Files",
	"agents.updated":    "Last change",
	"agent.title":       "Agent",
	"agent.files":       "Memory files (injection order)",
	"agent.runs":        "Last runs",
	"agent.allruns":     "All runs",
	"agent.next":        "Next consolidation",
	"agent.prompt":      "What the model sees",
	"agent.manual":      "Manual runs",
	"file.name":         "File",
	"file.enabled":      "Injected",
	"file.order":        "Order",
	"file.size":         "Size",
	"file.version":      "Version",
	"file.updated":      "Updated",
	"file.view":         "View",
	"file.edit":         "Edit",
	"file.save":         "Save",
	"file.saved":        "Saved as version %d.",
	"file.history":      "History",
	"file.flags":        "Save settings",
	"file.content":      "Content",
	"file.new":          "New file",
	"file.newname":      "File name",
	"file.create":       "Create",
	"conflict.title":    "Conflict: the file changed while you edited it",
	"conflict.help":     "Version %d was saved by someone else after you opened version %d. Your text is below; nothing was lost. Compare, then save yours over the new version or discard it.",
	"conflict.mine":     "Your text",
	"conflict.theirs":   "Current version %d",
	"conflict.saveover": "Save mine over version %d",
	"conflict.discard":  "Discard mine and reload",
	"diff.title":        "Differences",
	"diff.none":         "No differences.",
	"history.title":     "History",
	"history.version":   "Version",
	"history.action":    "Action",
	"history.actor":     "Changed by",
	"history.ref":       "Run or event",
	"history.when":      "Replaced at",
	"history.compare":   "Compare",
	"history.left":      "Left",
	"history.right":     "Right",
	"history.current":   "current",
	"history.rollback":  "Roll back to this",
	"rollback.title":    "Roll back %s to version %d?",
	"rollback.help":     "The current version %d will be replaced by version %d (the current text stays in history).",
	"rollback.confirm":  "Yes, roll back",
	"rollback.cancel":   "Cancel",
	"rollback.done":     "Rolled back: now version %d.",
	"runs.title":        "Runs",
	"runs.kind":         "Kind",
	"runs.status":       "Status",
	"runs.since":        "Since",
	"runs.filter":       "Filter",
	"runs.any":          "any",
	"runs.when":         "When",
	"runs.reason":       "Reason",
	"runs.usage":        "LLM usage",
	"runs.filesch":      "Files changed",
	"runs.event":        "Event",
	"runs.none":         "No runs match.",
	"runs.conv":         "Conversation id",
	"runs.summarize":    "Summarize now",
	"runs.force":        "Re-extract even if already extracted",
	"runs.emergence":    "Consolidate now",
	"runs.pending":      "Still running: the outcome will appear in the ledger.",
	"runs.noworker":     "No summarizer worker is running; the request stays queued.",
	"prompt.title":      "System prompt",
	"prompt.tokens":     "Token budget",
	"prompt.help":       "What the model is given as the workspace part of its system prompt, assembled now from the enabled files in injection order.",
	"cron.title":        "Cron jobs",
	"cron.name":         "Name",
	"cron.expr":         "Cron expression",
	"cron.tz":           "Time zone",
	"cron.type":         "Task type",
	"cron.message":      "Trigger message",
	"cron.enabled":      "Enabled",
	"cron.next":         "Next fire times",
	"cron.agent":        "Agent",
	"cron.create":       "Create job",
	"cron.save":         "Save job",
	"cron.delete":       "Delete",
	"cron.edit":         "Edit",
	"cron.none":         "No cron jobs.",
	"cron.new":          "New cron job",
	"cron.exprhelp":     "Five fields (minute hour day month weekday), e.g. 0 3 * * *. Leave the time zone empty for the agent's.",
	"ops.title":         "Operations",
	"ops.streams":       "Streams and consumers",
	"ops.stream":        "Stream",
	"ops.msgs":          "Messages",
	"ops.bytes":         "Bytes",
	"ops.consumer":      "Consumer",
	"ops.pending":       "Pending (lag)",
	"ops.acks":          "Awaiting ack",
	"ops.redeliv":       "Redelivered",
	"ops.waiting":       "Pull requests waiting",
	"ops.leader":        "Scheduler leader",
	"ops.noleader":      "No scheduler holds the leader lease.",
	"ops.workers":       "Worker health",
	"ops.workershelp":   "A worker pulls from its consumer: pull requests waiting mean workers are idle and ready; none waiting and messages pending mean none is running.",
	"ops.dlq":           "Dead letters",
	"ops.dlqnone":       "No dead letters.",
	"ops.retry":         "Retry",
	"ops.discard":       "Discard",
	"ops.retried":       "Dead letter %d republished on %s.",
	"ops.discarded":     "Dead letter %d discarded.",
	"ops.chart":         "Runs per hour by status (last 24 h)",
	"ops.latency":       "Extraction latency (ms) of the last runs",
	"ops.subject":       "Subject",
	"ops.deliveries":    "Deliveries",
	"err.notfound":      "No such page.",
	"err.csrf":          "The form expired or came from another site (CSRF check failed). Reload the page and try again.",
	"err.signin":        "Please sign in again.",
	"err.agentscope":    "This API key may not act for agent %d.",
	"err.admin":         "This page needs an admin API key.",
	"err.title":         "Something went wrong",
	"err.back":          "Back to the console",
	"state.enabled":     "on",
	"state.disabled":    "off",
	"yes":               "yes",
	"no":                "no",
}

var zh = map[string]string{
	"title":             "MateMemory 控制台",
	"nav.agents":        "智能体",
	"nav.cron":          "定时任务",
	"nav.ops":           "运维",
	"nav.signout":       "退出登录",
	"nav.skip":          "跳到正文",
	"lang.switch":       "English",
	"signin.title":      "登录",
	"signin.key":        "API 密钥",
	"signin.help":       "与 REST API 相同的密钥（mate.auth.keys）。智能体密钥只能看到自己的智能体；运维页面需要 admin 权限。",
	"signin.submit":     "登录",
	"signin.bad":        "API 密钥无效。",
	"signin.open":       "未配置 API 密钥：控制台仅在本机回环地址上开放。",
	"agents.title":      "智能体",
	"agents.none":       "还没有智能体。智能体第一次写记忆或发送事件时出现。",
	"agents.id":         "智能体",
	"agents.language":   "语言",
	"agents.timezone":   "时区",
	"agents.files":      "文件数",
	"agents.updated":    "最近修改",
	"agent.title":       "智能体",
	"agent.files":       "记忆文件（注入顺序）",
	"agent.runs":        "最近运行",
	"agent.allruns":     "全部运行记录",
	"agent.next":        "下次记忆整合",
	"agent.prompt":      "模型看到的内容",
	"agent.manual":      "手动运行",
	"file.name":         "文件",
	"file.enabled":      "注入",
	"file.order":        "顺序",
	"file.size":         "大小",
	"file.version":      "版本",
	"file.updated":      "更新时间",
	"file.view":         "查看",
	"file.edit":         "编辑",
	"file.save":         "保存",
	"file.saved":        "已保存为版本 %d。",
	"file.history":      "历史",
	"file.flags":        "保存设置",
	"file.content":      "内容",
	"file.new":          "新建文件",
	"file.newname":      "文件名",
	"file.create":       "创建",
	"conflict.title":    "冲突：编辑期间文件已被修改",
	"conflict.help":     "在你打开版本 %[2]d 之后，别人保存了版本 %[1]d。你的文本在下方，没有丢失。比较后，可以用你的文本覆盖新版本，或放弃。",
	"conflict.mine":     "你的文本",
	"conflict.theirs":   "当前版本 %d",
	"conflict.saveover": "用我的文本覆盖版本 %d",
	"conflict.discard":  "放弃我的修改并重新加载",
	"diff.title":        "差异",
	"diff.none":         "没有差异。",
	"history.title":     "历史",
	"history.version":   "版本",
	"history.action":    "操作",
	"history.actor":     "修改者",
	"history.ref":       "运行或事件",
	"history.when":      "被替换时间",
	"history.compare":   "比较",
	"history.left":      "左",
	"history.right":     "右",
	"history.current":   "当前",
	"history.rollback":  "回滚到此版本",
	"rollback.title":    "将 %s 回滚到版本 %d？",
	"rollback.help":     "当前版本 %d 将被版本 %d 替换（当前文本保留在历史中）。",
	"rollback.confirm":  "确认回滚",
	"rollback.cancel":   "取消",
	"rollback.done":     "已回滚：现在是版本 %d。",
	"runs.title":        "运行记录",
	"runs.kind":         "类型",
	"runs.status":       "状态",
	"runs.since":        "起始时间",
	"runs.filter":       "筛选",
	"runs.any":          "全部",
	"runs.when":         "时间",
	"runs.reason":       "原因",
	"runs.usage":        "LLM 用量",
	"runs.filesch":      "修改的文件",
	"runs.event":        "事件",
	"runs.none":         "没有匹配的运行记录。",
	"runs.conv":         "会话 ID",
	"runs.summarize":    "立即提取记忆",
	"runs.force":        "即使已提取也重新提取",
	"runs.emergence":    "立即整合记忆",
	"runs.pending":      "仍在运行：结果会出现在运行记录中。",
	"runs.noworker":     "没有记忆提取进程在运行；请求会保留在队列中。",
	"prompt.title":      "系统提示词",
	"prompt.tokens":     "Token 预算",
	"prompt.help":       "模型系统提示词中的工作区部分，按注入顺序由启用的文件现在组装而成。",
	"cron.title":        "定时任务",
	"cron.name":         "名称",
	"cron.expr":         "Cron 表达式",
	"cron.tz":           "时区",
	"cron.type":         "任务类型",
	"cron.message":      "触发消息",
	"cron.enabled":      "启用",
	"cron.next":         "接下来的触发时间",
	"cron.agent":        "智能体",
	"cron.create":       "创建任务",
	"cron.save":         "保存任务",
	"cron.delete":       "删除",
	"cron.edit":         "编辑",
	"cron.none":         "没有定时任务。",
	"cron.new":          "新建定时任务",
	"cron.exprhelp":     "五个字段（分 时 日 月 周），例如 0 3 * * *。时区留空则使用智能体的时区。",
	"ops.title":         "运维",
	"ops.streams":       "流与消费者",
	"ops.stream":        "流",
	"ops.msgs":          "消息数",
	"ops.bytes":         "字节",
	"ops.consumer":      "消费者",
	"ops.pending":       "待处理（积压）",
	"ops.acks":          "等待确认",
	"ops.redeliv":       "重投递",
	"ops.waiting":       "等待中的拉取请求",
	"ops.leader":        "调度器主节点",
	"ops.noleader":      "没有调度器持有主节点租约。",
	"ops.workers":       "工作进程健康",
	"ops.workershelp":   "工作进程从消费者拉取消息：有等待中的拉取请求说明进程空闲可用；没有等待且有积压说明没有进程在运行。",
	"ops.dlq":           "死信",
	"ops.dlqnone":       "没有死信。",
	"ops.retry":         "重试",
	"ops.discard":       "丢弃",
	"ops.retried":       "死信 %d 已重新发布到 %s。",
	"ops.discarded":     "死信 %d 已丢弃。",
	"ops.chart":         "每小时运行数（按状态，最近 24 小时）",
	"ops.latency":       "最近运行的提取延迟（毫秒）",
	"ops.subject":       "主题",
	"ops.deliveries":    "投递次数",
	"err.notfound":      "页面不存在。",
	"err.csrf":          "表单已过期或来自其他网站（CSRF 校验失败）。请刷新页面后重试。",
	"err.signin":        "请重新登录。",
	"err.agentscope":    "此 API 密钥无权操作智能体 %d。",
	"err.admin":         "此页面需要 admin API 密钥。",
	"err.title":         "出错了",
	"err.back":          "返回控制台",
	"state.enabled":     "开",
	"state.disabled":    "关",
	"yes":               "是",
	"no":                "否",
}
