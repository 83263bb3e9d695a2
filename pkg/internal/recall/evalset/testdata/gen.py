#!/usr/bin/env python3
"""Generates eval.json: a synthetic five-month memory of one agent and queries with gold chunks.

Deterministic (fixed seed). Run: python3 gen.py > eval.json
Each gold is a file and a marker string that the gold chunk's text contains.
"""
import json, random, datetime

rnd = random.Random(11)
start = datetime.date(2026, 1, 5)
days = [start + datetime.timedelta(days=i) for i in range(0, 146)]  # to 2026-05-30
notes = {}   # filename -> list of paragraphs
queries = []

def note(day, para):
    notes.setdefault(f"memory/{day.isoformat()}.md", []).append(para)

def q(text, gold_file, marker, kind, stale=None, origin=None):
    e = {"query": text, "kind": kind, "gold": [{"file": gold_file, "contains": marker}] if gold_file else []}
    if stale:
        e["stale"] = [{"file": f, "contains": m} for f, m in stale]
    if origin:
        e["origin"] = origin
    queries.append(e)

fillers_en = ["Reviewed two pull requests and answered email.", "Quiet day; mostly reading documentation.",
              "Weekly sync with the team went fine, nothing notable.", "Cleaned up the backlog and closed stale tickets.",
              "Lunch at the usual place; talked about the weather.", "Spent the afternoon on code review."]
fillers_zh = ["今天主要在看文档，没有特别的事情。", "和团队开了周会，一切正常。", "整理了待办事项，关掉了几个过期的工单。",
              "中午在老地方吃饭，聊了聊天气。", "下午一直在做代码评审。", "回复了几封邮件，处理了一些琐事。"]
for d in days:
    note(d, rnd.choice(fillers_en if rnd.random() < 0.5 else fillers_zh))

cities_zh = ["杭州", "成都", "西安", "厦门", "青岛", "苏州", "南京", "武汉", "重庆", "大连"]
foods_zh = ["小笼包", "火锅", "肉夹馍", "沙茶面", "海鲜", "生煎", "盐水鸭", "热干面", "小面", "烤鱿鱼"]
people_en = ["Alice Moreau", "Bogdan Ilic", "Chen Wei", "Dana Okafor", "Emil Strand", "Farah Haddad", "Gustavo Lima",
             "Hana Sato", "Ivan Petrov", "Julia Brandt", "Kofi Mensah", "Lena Vogel"]
roles_en = ["new designer", "database consultant", "product owner", "security auditor", "intern", "account manager"]
products = ["standing desk", "mechanical keyboard", "noise-cancelling headphones", "espresso machine", "e-reader",
            "robot vacuum", "air purifier", "mountain bike", "drawing tablet", "camping tent"]
used_days = set()
def pick_day(lo=0, hi=len(days) - 1):
    while True:
        d = days[rnd.randint(lo, hi)]
        if d not in used_days or rnd.random() < 0.3:
            used_days.add(d)
            return d

# 1. Orders (identifiers, English)
for i in range(30):
    d = pick_day()
    oid = f"ORD-2026-{rnd.randint(1000, 9999)}"
    prod = rnd.choice(products)
    f = f"memory/{d.isoformat()}.md"
    note(d, f"Ordered a {prod} for the user, order number {oid}, delivery expected in {rnd.randint(2, 9)} days.")
    q(oid, f, oid, "identifier")
    if i % 2 == 0:
        q(f"order number of the {prod}", f, oid, "keyword")

# 2. Hosts (identifiers, mixed zh/en)
envs = [("prod", "生产"), ("staging", "预发"), ("dev", "开发")]
for i in range(30):
    d = pick_day()
    env, envzh = envs[i % 3]
    host = f"{rnd.choice(['db', 'api', 'cache', 'queue', 'web'])}-{env}-{rnd.randint(1, 40):02d}.corp.internal"
    f = f"memory/{d.isoformat()}.md"
    if i % 2 == 0:
        note(d, f"把{envzh}环境的数据库迁移到了 {host}，旧机器下周下线。")
        q(host, f, host, "identifier")
        q(f"{envzh}环境数据库迁移到哪台机器", f, host, "zh")
    else:
        note(d, f"The {env} job runner now lives on {host}; restart it with the deploy script.")
        q(host, f, host, "identifier")
        q(f"where does the {env} job runner live", f, host, "keyword")

# 3. Trips (Chinese)
for i in range(25):
    d = pick_day()
    city, food = cities_zh[i % 10], foods_zh[i % 10]
    f = f"memory/{d.isoformat()}.md"
    marker = f"去{city}出差"
    note(d, f"用户说下个月要{marker}，想顺便吃{food}，酒店订在市中心。")
    q(f"{city}出差", f, marker, "zh")
    if i % 2 == 0:
        q(f"用户想在{city}吃什么", f, marker, "zh")

# 4. People (English)
for i, p in enumerate(people_en):
    d = pick_day()
    role = roles_en[i % len(roles_en)]
    f = f"memory/{d.isoformat()}.md"
    note(d, f"Met {p}, the {role}; they prefer async updates and are based in {rnd.choice(['Lisbon', 'Nairobi', 'Osaka', 'Toronto', 'Berlin'])}.")
    q(p, f, p, "identifier")
    q(f"who is the {role}", f, p, "keyword")

# 5. Mixed-language decisions
decisions = [("Redis", "缓存层改用 Redis 集群"), ("Kafka", "消息队列换成 Kafka"), ("Postgres", "报表库迁到 Postgres"),
             ("Grafana", "监控面板统一用 Grafana"), ("Terraform", "基础设施用 Terraform 管理"), ("gRPC", "内部服务之间改用 gRPC"),
             ("OAuth", "登录接入 OAuth 单点登录"), ("S3", "备份上传到 S3 冷存储"), ("ClickHouse", "日志分析用 ClickHouse"),
             ("Vault", "密钥统一放进 Vault")]
for tech, zh in decisions:
    d = pick_day()
    f = f"memory/{d.isoformat()}.md"
    note(d, f"决定：{zh}（decided with the team, ticket ENG-{rnd.randint(100, 999)}）。")
    q(f"{tech} 决定", f, zh, "mixed")
    q(zh[:6], f, zh, "zh")

# 6. Superseded facts: the later note is gold
superseded = [
    ("The daily standup is at 9:00.", "The daily standup moved to 10:30 from now on.", "when is the daily standup", "moved to 10:30"),
    ("The user's gym is FitOne on Main Street.", "The user switched gyms to PulseClub near the office.", "which gym does the user go to", "PulseClub"),
    ("用户的车位是 B2-117。", "用户的车位换成了 B1-032。", "用户的车位号", "B1-032"),
    ("The Wi-Fi password hint is 'blue heron'.", "The Wi-Fi password hint changed to 'red kite'.", "wifi password hint", "red kite"),
    ("用户的牙医是李医生。", "用户换了牙医，现在是王医生。", "用户的牙医是谁", "王医生"),
    ("The team lunch budget is 25 EUR per person.", "The team lunch budget was raised to 32 EUR per person.", "team lunch budget", "32 EUR"),
    ("The on-call rotation changes on Mondays.", "The on-call rotation now changes on Thursdays.", "when does on-call rotation change", "Thursdays"),
    ("用户每周二上日语课。", "用户的日语课改到了每周四晚上。", "日语课是哪天", "每周四"),
    ("The VPN endpoint is vpn-old.corp.internal.", "The VPN endpoint moved to vpn-edge-2.corp.internal.", "VPN endpoint", "vpn-edge-2"),
    ("The user's manager is Tom Baker.", "The user's new manager is Priya Nair.", "who is the user's manager", "Priya Nair"),
]
for old, new, query, marker in superseded:
    d1, d2 = pick_day(0, 40), pick_day(100, len(days) - 1)
    note(d1, old)
    note(d2, new)
    q(query, f"memory/{d2.isoformat()}.md", marker, "superseded", stale=[(f"memory/{d1.isoformat()}.md", old)])

# 7. Paraphrases (no shared words with the note: hard for BM25, and for the test embedder)
paraphrases = [
    ("The user is allergic to peanuts.", "food the user must avoid", "allergic to peanuts"),
    ("用户对花生过敏。", "用户不能吃什么", "花生过敏"),
    ("The user's daughter starts school in September.", "when does the kid begin classes", "starts school in September"),
    ("The user runs a half marathon every spring.", "yearly running race", "half marathon"),
    ("The user dislikes phone calls before 10 am.", "best time to ring the user", "phone calls before 10 am"),
    ("用户喜欢安静的咖啡馆写东西。", "用户在哪里写作", "安静的咖啡馆"),
    ("The user keeps receipts in the green folder.", "where are expense papers stored", "green folder"),
    ("The user's birthday is on 14 March.", "user birthday date", "14 March"),
]
for text, query, marker in paraphrases:
    d = pick_day()
    note(d, text)
    q(query, f"memory/{d.isoformat()}.md", marker, "paraphrase")

# 8. Sub-folder dated notes (projects) and conversations
for i in range(12):
    d = pick_day()
    code = f"PRJ-{rnd.randint(10, 99)}"
    f = f"memory/projects/{d.isoformat()}-{code.lower()}.md"
    notes.setdefault(f, []).append(f"Project {code} kickoff: budget {rnd.randint(10, 90)}k, owner {rnd.choice(people_en)}, first milestone in {rnd.choice(['April', 'May', 'June'])}.")
    q(f"{code} budget", f, code, "identifier")
for i in range(12):
    d = pick_day()
    f = f"memory/conversations/{d.isoformat()}-c{i:02d}.md"
    topic = rnd.choice(["换工作", "买房", "学吉他", "养猫", "装修", "考驾照"])
    notes.setdefault(f, []).append(f"对话摘要（c{i:02d}）：用户在考虑{topic}，预算大约 {rnd.randint(2, 90)} 万，担心时间不够，我建议先列一个三个月的计划。")
    q(f"用户考虑{topic}", f, topic, "zh")

memory = ["# MEMORY", "", "## Preferences", "", "- The user prefers tea over coffee, especially oolong.",
          "- 用户周末不看工作消息。", "", "## Work", "", "- The user works at Northwind Labs as a platform engineer.",
          "- 常用的部署命令是 make deploy ENV=prod。", ""]
profile = ["# PROFILE", "", "Name: Sam Rivera. Lives in Shenzhen. Languages: English, 中文.", ""]
files = {"MEMORY.md": "\n".join(memory), "PROFILE.md": "\n".join(profile)}
q("tea or coffee", "MEMORY.md", "prefers tea over coffee", "keyword")
q("部署命令", "MEMORY.md", "make deploy ENV=prod", "zh")
q("where does the user work", "MEMORY.md", "Northwind Labs", "keyword")
q("周末工作消息", "MEMORY.md", "周末不看工作消息", "zh")
q("Sam Rivera lives", "PROFILE.md", "Shenzhen", "keyword")

exec(open(__import__("os").path.join(__import__("os").path.dirname(__file__), "gen_issue19.py")).read())

for name, paras in sorted(notes.items()):
    if name.startswith("memory/conversations/") or name.startswith("memory/projects/"):
        files[name] = "\n\n".join(paras) + "\n"
    else:
        day = name[len("memory/"):-3]
        files[name] = f"# {day}\n\n" + "\n\n".join(paras) + "\n"

json.dump({"now": "2026-06-01T09:00:00Z", "files": files, "queries": queries}, __import__("sys").stdout,
          ensure_ascii=False, indent=1)
