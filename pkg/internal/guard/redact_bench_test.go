package guard

import (
	"strings"
	"testing"
)

// benchTranscriptEN is an ordinary chat transcript of about 2 KB with no secret in it, but
// with the words and shapes the patterns look for (labels with colons, times, URLs,
// "token", "key", "password", "basic", numbers), as the summarizer sees every day.
const benchTranscriptEN = `[2026-03-14 09:12] User: Good morning! Can you help me plan the week? I have the release on Friday.
[2026-03-14 09:12] Assistant: Good morning! Sure. What is on the list so far, and which items are fixed?
[2026-03-14 09:13] User: Monday: finish the benchmark report for Bob. Tuesday: review Alice's pull request about the NATS consumer. Wednesday is the team lunch at 12:30, and the dentist at 16:00.
[2026-03-14 09:14] Assistant: Noted. For the report, do you want the basic numbers only or the full comparison with last quarter? The full one takes about two hours.
[2026-03-14 09:15] User: The full one. Also remind me that the max tokens setting was 4096 in the old config and should be 8192 now.
[2026-03-14 09:15] Assistant: Will do. I'll note: "max tokens: 8192 (was 4096)". Anything about the API key rotation you mentioned last week?
[2026-03-14 09:16] User: Yes, the key rotation is done, I forgot my password for the admin console yesterday but IT reset it. The docs are at https://pkg.go.dev/regexp and https://example.com/docs/setup?lang=en#install.
[2026-03-14 09:17] Assistant: Good to hear it is sorted. Shall I put the docs links in the Friday checklist?
[2026-03-14 09:18] User: Please. And order 4111111111111112 from the bookshop should arrive Thursday; call them at +86 138 0013 8000 if not.
[2026-03-14 09:18] Assistant: Added. The checklist now reads: 1) report, 2) review, 3) lunch, 4) dentist, 5) bookshop order, 6) release notes.
[2026-03-14 09:19] User: Great. One more thing: the pin on the map for the lunch place is wrong, it is on Baker Street, not Bridge Road.
[2026-03-14 09:20] Assistant: Thanks, I corrected the address. Is there a code review you want me to schedule before the release?
[2026-03-14 09:21] User: Yes, Thursday 10:00 with Carol and Dave. Keep it short, forty minutes at most.
[2026-03-14 09:21] Assistant: Booked: Thursday 10:00-10:40, code review with Carol and Dave. Have a nice day!
`

// benchTranscriptZH is the Chinese counterpart of benchTranscriptEN, about 2 KB.
const benchTranscriptZH = `[2026-03-14 09:12] 用户：早上好！帮我安排一下这周的计划吧，周五要发布新版本。
[2026-03-14 09:12] 助手：早上好！没问题。目前有哪些事项？哪些时间是固定的？
[2026-03-14 09:13] 用户：周一写完给老李的性能测试报告。周二评审小王关于 NATS 消费者的合并请求。周三中午十二点半团队聚餐，下午四点看牙医。
[2026-03-14 09:14] 助手：记下了。报告只要基本数据，还是要和上个季度完整对比？完整的大概需要两个小时。
[2026-03-14 09:15] 用户：要完整的。另外提醒我，旧配置里最大令牌数是 4096，现在应该改成 8192。
[2026-03-14 09:15] 助手：好的，我会记下"最大令牌数 8192（原来 4096）"。上周提到的密钥轮换怎么样了？
[2026-03-14 09:16] 用户：轮换已经做完了。昨天我忘了管理后台的登录密码，不过运维帮我重置了。文档在 https://pkg.go.dev/regexp 。
[2026-03-14 09:17] 助手：解决了就好。要把文档链接放进周五的检查清单吗？
[2026-03-14 09:18] 用户：放进去吧。书店的订单 4111111111111112 周四应该到，没到的话打 138 0013 8000 问一下。
[2026-03-14 09:18] 助手：已添加。检查清单现在是：一、报告；二、评审；三、聚餐；四、牙医；五、书店订单；六、发布说明。
[2026-03-14 09:19] 用户：很好。还有，地图上聚餐地点标错了，应该在贝克街，不是桥路。
[2026-03-14 09:20] 助手：谢谢，地址已改正。发布前要不要安排一次代码评审？
[2026-03-14 09:21] 用户：要，周四上午十点，和小张、小刘一起。控制在四十分钟以内。
[2026-03-14 09:21] 助手：已预约：周四 10:00-10:40，和小张、小刘一起做代码评审。祝你今天愉快！
`

// benchReason is a ledger reason of about 100 bytes.
const benchReason = "rewrite refused: the new MEMORY.md keeps only 31% of the old facts (minimum 40%); retry 2 of 3"

// benchTranscriptSecrets is benchTranscriptEN with a few secrets pasted in.
var benchTranscriptSecrets = strings.Replace(strings.Replace(strings.Replace(benchTranscriptEN,
	"IT reset it.", "IT reset it: the new password=Tr0ub4dor&3, and the staging key is sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789.", 1),
	"should arrive Thursday;", "should arrive Thursday, I paid with card 4111 1111 1111 1111;", 1),
	"https://example.com/docs/setup", "mysql://root:s3cr3t@db:3306/mate and https://example.com/docs/setup", 1)

// BenchmarkRedact runs the reference (the implementation before the fast path) and Redact
// side by side on the same inputs; compare the ns/op of each pair.
func BenchmarkRedact(b *testing.B) {
	inputs := []struct{ name, text string }{
		{"transcript-en", benchTranscriptEN},
		{"transcript-zh", benchTranscriptZH},
		{"reason", benchReason},
		{"transcript-secrets", benchTranscriptSecrets},
	}
	impls := []struct {
		name string
		f    func(string) string
	}{
		{"reference", referenceRedact},
		{"new", Redact},
	}
	for _, in := range inputs {
		for _, impl := range impls {
			b.Run(in.name+"/"+impl.name, func(b *testing.B) {
				b.SetBytes(int64(len(in.text)))
				b.ReportAllocs()
				for b.Loop() {
					impl.f(in.text)
				}
			})
		}
	}
}
