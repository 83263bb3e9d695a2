# The kinds issue 19 added to the evaluation (run by gen.py, which defines note, q, days, files).
# Its own random generator, so the original set's files and queries stay as they were; the new
# paragraphs are appended to the daily notes they fall on. Queries carry "origin": "issue19".
r19 = __import__("random").Random(19)
O = "issue19"

def day_between(lo, hi):
    return days[r19.randint(lo, hi)]

def fname(d):
    return f"memory/{d.isoformat()}.md"

# A. Superseded facts: the older note usually matches the query's words better; the newer one
# corrects it. Gold is the newer note, stale the older one.
superseded19 = [
    ("周会定在每周三晚上八点，线上开，大家记得提前进会议室。", "周会从每周三晚上挪到了周六上午十点。", "周会是什么时候开", "每周三晚上八点", "周六上午十点"),
    ("和供应商谈好了：最低起订量是 2000 件，低于最低起订量要加收运费。", "供应商同意把最低起订量降到 1500 件。", "供应商最低起订量是多少", "2000 件", "1500 件"),
    ("The user's rent is 3200 CNY per month; the rent is paid on the 5th.", "Rent goes up to 3500 CNY from June.", "how much is the user's rent", "3200 CNY", "3500 CNY"),
    ("The staging database password rotates every 90 days; the staging database owner is ops.", "Staging password rotation is every 30 days now.", "staging database password rotation", "every 90 days", "every 30 days"),
    ("用户的健身教练是小刘，健身课每周一、四上。", "健身教练换成了小张。", "用户的健身教练是谁", "小刘", "小张"),
    ("The release branch is cut every second Friday; the release manager tags the release branch.", "Release branches are cut every Tuesday from now on.", "when is the release branch cut", "every second Friday", "every Tuesday"),
    ("用户的手机号尾号是 3391，手机号只用来收验证码。", "用户换了号码，尾号 7720。", "用户手机号尾号", "3391", "7720"),
    ("The office address is 18 Harbour Road, 5th floor; visitors sign in at the office lobby.", "The office moved to 220 Binhai Avenue, 12th floor.", "office address", "18 Harbour Road", "220 Binhai Avenue"),
    ("Atlas 项目的上线日期定在 3 月 20 日，上线前一周封版。", "Atlas 上线推迟到 4 月 8 日。", "Atlas 项目上线日期", "3 月 20 日", "4 月 8 日"),
    ("The user's preferred airline is Cathay Pacific; book the preferred airline when possible.", "The user now flies Singapore Airlines by preference.", "preferred airline", "Cathay Pacific", "Singapore Airlines"),
    ("孩子的钢琴课在周日下午三点，钢琴课老师姓周。", "钢琴课调到了周六上午九点。", "钢琴课时间", "周日下午三点", "周六上午九点"),
    ("The CI runners use Ubuntu 22.04 images; CI runners are rebuilt monthly.", "CI moved to Ubuntu 24.04 images.", "which Ubuntu image do the CI runners use", "22.04", "24.04"),
    ("The quarterly budget review is owned by Marta; the budget review is due in the first week.", "Jonas took over the quarterly budget review.", "who owns the quarterly budget review", "owned by Marta", "Jonas took over"),
    ("快递默认寄到公司前台，快递到了前台会发短信。", "以后快递改寄到家里。", "快递寄到哪里", "寄到公司前台", "改寄到家里"),
    ("The partner API rate limit is 100 requests per minute per partner key.", "Partner rate limit raised to 300 requests per minute.", "partner API rate limit", "100 requests", "300 requests"),
    ("用户喝咖啡要燕麦奶拿铁，少糖，咖啡不要太烫。", "用户最近改喝美式了，不加奶。", "用户喝什么咖啡", "燕麦奶拿铁", "改喝美式"),
    ("Backups run nightly at 02:00 to the NAS; backups older than 30 days are pruned.", "Backups now run at 04:30, to S3 instead of the NAS.", "when do backups run", "02:00", "04:30"),
    ("合同续签的截止日是 4 月 30 日，合同续签要法务签字。", "续签截止日延后到了 5 月 15 日。", "合同续签截止日", "4 月 30 日", "5 月 15 日"),
    ("The design review meeting room is Orion; the design review starts at 15:00.", "Design reviews moved to the Vega room.", "design review meeting room", "is Orion", "Vega room"),
    ("用户的体检约在 3 月 12 日上午，体检前一天晚上要空腹。", "体检改约到了 3 月 26 日。", "体检约在哪天", "3 月 12 日", "3 月 26 日"),
    ("The default deploy region is eu-west-1 for every new default service.", "Default region switched to ap-southeast-1.", "default deploy region", "eu-west-1", "ap-southeast-1"),
    ("用户的 standup 在 Zoom 上开，standup 链接在日历里。", "Standup 改到 Teams 了。", "standup 在哪开", "Zoom", "Teams"),
    ("Lena's team handles the invoice export; ask Lena about invoice export bugs.", "Invoice export moved to Kofi's team.", "who handles the invoice export", "Lena's team", "Kofi's team"),
]
for k, (old, new, query, old_m, new_m) in enumerate(superseded19):
    lo = r19.randint(0, 90)
    gap = r19.choice([3, 8, 15, 30, 45])
    d1, d2 = days[lo], days[min(lo + gap, len(days) - 1)]
    note(d1, old)
    note(d2, new)
    q(query, fname(d2), new_m, "superseded", stale=[(fname(d1), old_m)], origin=O)

# B. Restated facts with one change: the fact is written down on several days, then once with
# one detail changed. Gold is the changed note.
restated19 = [
    ("提醒：每周一上午十点产品例会，在三楼会议室。", "提醒：每周一上午十点产品例会，这周起在五楼大会议室。", "产品例会在哪开", "五楼大会议室"),
    ("Reminder: expense reports are due on the 25th.", "Reminder: expense reports are due on the 20th this quarter.", "when are expense reports due", "the 20th"),
    ("用户每天早上七点去跑步。", "用户每天早上六点半去跑步。", "用户几点去跑步", "六点半"),
    ("Standing order: 2 kg of coffee beans from Bean Bros every month.", "Standing order: 3 kg of coffee beans from Bean Bros every month.", "coffee beans standing order", "3 kg"),
    ("机房门禁的密码提示是“老树”。", "机房门禁的密码提示换成“新桥”。", "机房门禁密码提示", "新桥"),
    ("The weekly report goes to Lina and the ops channel.", "The weekly report goes to Lina, the ops channel and Marcus.", "who gets the weekly report", "and Marcus"),
    ("家里的宽带是电信 300M。", "家里的宽带是电信 1000M。", "家里宽带多少兆", "1000M"),
    ("The on-call phone is with Ravi this week.", "The on-call phone is with Odile this week.", "who has the on-call phone", "with Odile"),
    ("用户的车在小区地下二层充电。", "用户的车在公司停车场充电。", "用户的车在哪充电", "公司停车场"),
    ("Sprint planning is Monday 14:00 in room Atlas.", "Sprint planning is Monday 15:30 in room Atlas.", "sprint planning time", "15:30"),
    ("孩子的校车早上 7:20 到小区门口。", "孩子的校车早上 7:05 到小区门口。", "校车几点到小区门口", "7:05"),
    ("The shared drive quota per team is 500 GB.", "The shared drive quota per team is 2 TB.", "shared drive quota per team", "2 TB"),
    ("用户每月给父母转 3000 元生活费。", "用户每月给父母转 4000 元生活费。", "每月给父母多少生活费", "4000 元"),
    ("Deploy freeze starts every Friday at 16:00.", "Deploy freeze starts every Friday at 12:00.", "when does the deploy freeze start", "12:00"),
    ("公司班车最后一班是晚上九点。", "公司班车最后一班是晚上十点半。", "最后一班班车几点", "十点半"),
    ("Cloud bill alert threshold: 800 USD a month.", "Cloud bill alert threshold: 1200 USD a month.", "cloud bill alert threshold", "1200 USD"),
    ("房东陈先生，每月 5 号交租。", "房东陈先生，每月 10 号交租。", "每月几号交租", "10 号"),
    ("Pairing sessions with the intern are on Wednesdays.", "Pairing sessions with the intern are on Thursdays.", "pairing sessions with the intern", "on Thursdays"),
    ("周报模板放在共享盘的周报文件夹。", "周报模板放在 Wiki 的团队主页。", "周报模板在哪", "Wiki 的团队主页"),
    ("The staging TLS certificate expires on 2026-07-01.", "The staging TLS certificate expires on 2027-07-01.", "staging TLS certificate expiry", "2027-07-01"),
    ("用户午饭一般点楼下的沙拉。", "用户午饭一般点楼下的牛肉面。", "用户午饭一般吃什么", "牛肉面"),
]
for base, changed, query, marker in restated19:
    n = r19.randint(4, 6)
    start = r19.randint(0, 80)
    ds = sorted(r19.sample(range(start, start + 55), n))
    for i in ds:
        note(days[i], base)
    dc = days[min(ds[-1] + r19.randint(2, 10), len(days) - 1)]
    note(dc, changed)
    q(query, fname(dc), marker, "restated", origin=O)

# C. Questions memory has no answer to, and small talk: gold is empty (no hits wanted).
noanswer19 = [
    "用户的护照号码是多少", "用户是什么血型", "用户的结婚纪念日是哪天", "用户最喜欢哪部电影", "公司年会在哪里办",
    "用户的鞋码多大", "用户的保险公司是哪家", "用户的微信号", "用户老家在哪个省", "用户有没有股票账户",
    "what is the user's blood type", "the user's passport number", "favourite movie of the user",
    "which university did the user attend", "the user's shoe size", "Kubernetes cluster upgrade plan",
    "car insurance renewal date", "salary negotiation outcome", "what instrument does the user play",
    "vegetarian restaurant recommendations", "MacBook 保修到什么时候", "Jira 项目的 key 是什么", "用户的 GitHub 用户名",
    "Figma 账号谁在管", "Python 版本升级计划",
]
smalltalk19 = [
    "你好", "谢谢，今天就到这里", "早上好", "晚安", "哈哈哈", "好的，明白了", "辛苦了", "在吗",
    "hi", "hello there", "thanks, that's all for today", "good morning", "ok cool", "see you tomorrow",
    "how are you", "lol",
]
for text in noanswer19:
    q(text, None, None, "no-answer", origin=O)
for text in smalltalk19:
    q(text, None, None, "small-talk", origin=O)

# D. Identifiers with and without their prefix or "v", and glued to Chinese.
idents19 = [
    ("Upgraded the gateway to v1.27.3 after the memory leak fix.", "1.27.3", "v1.27.3"),
    ("staging 集群现在跑的是 2.4.0 版本。", "v2.4.0", "2.4.0 版本"),
    ("PO-55812的交期是 12 月 3 日，供应商确认过。", "PO-55812的交期", "PO-55812的交期"),
    ("工单INC-3307已经关闭，原因是证书过期。", "INC-3307", "INC-3307"),
    ("采购单 PO-60231 的发票已经到了。", "60231", "PO-60231"),
    ("The refund for ticket #88412 was approved by finance.", "88412", "#88412"),
    ("发布 v3.0.0-rc2 推迟到下周。", "3.0.0-rc2", "v3.0.0-rc2"),
    ("快递单号SF1408836612已经送到前台。", "SF1408836612", "SF1408836612"),
    ("工单INC-4410是打印机坏了，已经报修。", "INC-4410是怎么回事", "INC-4410"),
    ("Node 版本锁定在 v20.11.1，不要随便升级。", "node 20.11.1", "v20.11.1"),
    ("订单号ORD-7781-A的退款到账了。", "ORD-7781-A退款", "ORD-7781-A"),
    ("The hotfix build 4.2.1 went out on Tuesday.", "v4.2.1 hotfix", "4.2.1"),
]
for text, query, marker in idents19:
    d = day_between(0, len(days) - 1)
    note(d, text)
    q(query, fname(d), marker, "identifier-variant", origin=O)

# E. A core file mentions the topic (a to-do line); the dated note has the answer.
core19 = [
    ("- 待办：问供应商验货的结果。", "供应商回复了验货结果：整批通过，只有 12 件外箱破损。", "供应商验货结果", "整批通过"),
    ("- To do: check whether the visa application was approved.", "The visa application was approved; passport pickup on Thursday.", "was the visa application approved", "pickup on Thursday"),
    ("- 待办：跟进报销审批。", "报销审批通过了，钱下周到账。", "报销审批进度", "钱下周到账"),
    ("- To do: ask the landlord about the broken heater.", "Landlord replied about the broken heater: a technician comes Monday to replace it.", "landlord broken heater", "technician comes Monday"),
    ("- 待办：确认婚礼场地的报价。", "婚礼场地的报价确认了，总价 4.8 万，含布置。", "婚礼场地报价", "总价 4.8 万"),
    ("- To do: follow up on the laptop repair.", "Laptop repair done: new keyboard and battery, picked it up today.", "laptop repair status", "new keyboard and battery"),
    ("- 待办：打听学区房的政策。", "打听清楚了学区房的政策：落户满三年才能入学。", "学区房政策", "落户满三年"),
    ("- To do: find out the result of the security audit.", "Security audit result: two medium findings, both fixed by Friday.", "security audit result", "two medium findings"),
    ("- 待办：问一下年假还剩几天。", "问了 HR，年假还剩 6 天，年底清零。", "年假还剩几天", "还剩 6 天"),
    ("- To do: get the quote for the office chairs.", "Office chairs quote came in: 12 chairs at 1,150 CNY each.", "office chairs quote", "1,150 CNY"),
]
todo = ["## 待办 / To do", ""]
for line, answer, query, marker in core19:
    todo.append(line)
    d = day_between(60, len(days) - 1)
    note(d, answer)
    q(query, fname(d), marker, "core-vs-dated", stale=[("MEMORY.md", line[2:])], origin=O)
files["MEMORY.md"] = files["MEMORY.md"].rstrip("\n") + "\n\n" + "\n".join(todo) + "\n"
