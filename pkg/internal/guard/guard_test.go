package guard

import (
	"errors"
	"strings"
	"testing"
)

const memoryEN = `# MEMORY.md

## Projects
- MateMemory: Go rebuild of an agent memory service on NATS JetStream.
- Deadline for the beta is 2026-05-01; Alice owns the release checklist.

## Decisions
- Use MariaDB in production, SQLite for the embedded mode.
- Summaries are written in the agent's time zone (Asia/Shanghai).

## Todo
- Write the benchmark report and send it to Bob.
`

const memoryZH = `# MEMORY.md

## 项目
- 正在用 Go 重写智能体记忆服务，基于 NATS JetStream 事件驱动。
- 测试版截止日期是五月一日，发布清单由小王负责。

## 决策
- 生产环境使用 MariaDB，嵌入模式使用 SQLite。
- 每日笔记按智能体所在时区（上海）命名。

## 待办
- 完成性能测试报告并发给老李。
`

func TestCheckRewrite(t *testing.T) {
	tests := []struct {
		name      string
		old, new  string
		truncated bool
		refused   string // substring of the reason; "" = accepted
	}{
		{"empty", memoryEN, "", false, "empty"},
		{"whitespace", memoryEN, " \n\t \n", false, "empty"},
		{"truncated", memoryEN, memoryEN + "- new fact", true, "token limit"},
		{"truncated even for a trivial file", "", "# MEMORY.md\n- x", true, "token limit"},
		{"trivial old accepts anything", "# MEMORY.md\n", "- The user likes cats.", false, ""},
		{"append a fact", memoryEN, memoryEN + "- The user prefers short answers.\n", false, ""},
		{"only the newest fact", memoryEN, "# MEMORY.md\n\n- The user prefers short answers.\n", false, "shorter than 40%"},
		{"reworded and reordered", memoryEN, `# MEMORY.md

## Decisions
- Production uses MariaDB; the embedded mode uses SQLite.
- Daily summaries follow the agent's time zone, Asia/Shanghai.

## Projects
- MateMemory is a Go rebuild of the agent memory service on NATS JetStream.
- Beta deadline 2026-05-01, release checklist owned by Alice.

## Todo
- Send the benchmark report to Bob.
`, false, ""},
		{"same length, other subject", memoryEN, `# MEMORY.md

## Cooking
- Grandmother's soup needs three carrots, two onions and a bay leaf.
- Simmer slowly for forty minutes and never boil it hard at any moment.

## Garden
- Tomatoes were planted in April near the eastern fence this spring season.
- Water the roses every other evening unless heavy rain has fallen today.

## Chores
- Fix the squeaky kitchen door hinge before the weekend visitors arrive here.
`, false, "keeps only"},
		{"chinese append", memoryZH, memoryZH + "- 用户喜欢简短的回答。\n", false, ""},
		{"chinese only newest fact", memoryZH, "# MEMORY.md\n\n- 用户喜欢简短的回答。\n", false, "shorter than 40%"},
		{"chinese reworded", memoryZH, `# MEMORY.md

## 决策
- 嵌入模式使用 SQLite，生产环境使用 MariaDB。
- 每日笔记以上海时区命名。

## 项目
- 用 Go 重写智能体记忆服务，事件驱动，基于 NATS JetStream。
- 发布清单由小王负责，测试版五月一日截止。

## 待办
- 性能测试报告完成后发给老李。
`, false, ""},
		{"chinese other subject", memoryZH, `# MEMORY.md

## 菜谱
- 奶奶的汤需要三根胡萝卜、两个洋葱和一片香叶，小火慢炖。
- 炖四十分钟，千万不要大火煮沸，否则味道会变得很奇怪。

## 花园
- 西红柿在四月种在东边篱笆旁边，今年长得特别好看。
- 玫瑰隔一天浇一次水，下大雨的日子就不用再浇了。

## 家务
- 周末客人来之前修好厨房门上吱吱作响的合页。
`, false, "keeps only"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckRewrite(tc.old, tc.new, tc.truncated)
			if tc.refused == "" {
				if err != nil {
					t.Fatalf("refused a sound rewrite: %v", err)
				}
				return
			}
			var re *RefusedError
			if !errors.As(err, &re) {
				t.Fatalf("accepted, want refusal containing %q (err %v)", tc.refused, err)
			}
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("errors.Is(err, ErrRefused) is false")
			}
			if !strings.Contains(re.Reason, tc.refused) {
				t.Fatalf("reason %q does not mention %q", re.Reason, tc.refused)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"openai key", "my key is sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789 ok", "my key is [REDACTED] ok"},
		{"anthropic key", "ANTHROPIC sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345", "ANTHROPIC [REDACTED]"},
		{"aws access key", "aws id AKIAIOSFODNN7EXAMPLE here", "aws id [REDACTED] here"},
		{"aws secret assignment", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws_secret_access_key = [REDACTED]"},
		{"github token", "token ghp_abcdefghijklmnopqrstuvwxyz0123456789AB", "token [REDACTED]"},
		{"github fine-grained", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "[REDACTED]"},
		{"slack token", "slack xoxb-1234567890-abcdefghijklmn", "slack [REDACTED]"},
		{"bearer", "curl -H 'Authorization: Bearer abcdef0123456789abcdef'", "curl -H 'Authorization: Bearer [REDACTED]'"},
		{"jwt", "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U end", "jwt [REDACTED] end"},
		{"private key", "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nAAAA\n-----END RSA PRIVATE KEY-----\nafter", "key:\n[REDACTED]\nafter"},
		{"password assignment", "db password=hunter2, user=bob", "db password=[REDACTED], user=bob"},
		{"password colon", "Password: correct-horse-battery", "Password: [REDACTED]"},
		{"json secret", `{"client_secret": "abc123def", "name": "x"}`, `{"client_secret": "[REDACTED]", "name": "x"}`},
		{"token assignment", "token=abcdef", "token=[REDACTED]"},
		{"api key", "API_KEY: 9f8e7d6c5b4a", "API_KEY: [REDACTED]"},
		{"url credentials", "mysql://root:s3cr3t@db:3306/mate", "mysql://root:[REDACTED]@db:3306/mate"},
		{"chinese password", "我的密码是 abc12345，别忘了", "我的密码是 [REDACTED]，别忘了"},
		{"chinese password colon", "服务器口令：Xy9#pq", "服务器口令：[REDACTED]"},
		{"chinese key", "密钥=k-998877。", "密钥=[REDACTED]。"},
		{"plain prose untouched", "The user likes tokens of appreciation and max tokens: 1000.", "The user likes tokens of appreciation and max tokens: 1000."},
		{"short sk untouched", "the sk-1 team", "the sk-1 team"},
		// Issue 9.6.
		{"english password phrase", "my password is hunter2. Remember it", "my password is [REDACTED]. Remember it"},
		{"english passcode was", "The door passcode was 4821!", "The door passcode was [REDACTED]!"},
		{"english pin", "my PIN is 0007", "my PIN is [REDACTED]"},
		{"card spaced", "card 4111 1111 1111 1111 exp 12/29", "card [REDACTED] exp 12/29"},
		{"card plain", "pay with 5500005555555559 please", "pay with [REDACTED] please"},
		{"card dashed amex", "amex 3782-822463-10005", "amex [REDACTED]"},
		{"order number not luhn", "order 4111111111111112 shipped", "order 4111111111111112 shipped"},
		{"phone untouched", "call +86 138 0013 8000", "call +86 138 0013 8000"},
		{"prose password untouched", "I forgot my password yesterday", "I forgot my password yesterday"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Redact(tc.in)
			if got != tc.want {
				t.Fatalf("Redact(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
			if again := Redact(got); again != got {
				t.Fatalf("not idempotent: %q → %q", got, again)
			}
		})
	}
}
