// Drives the daemon's /approvals page in Debian's chromium for crates/aileron/tests/it/browser/approvals.rs.
//
// The Rust test owns the scenario and every assertion; this script only acts in the browser and
// reports what it saw. Usage: node approvals.mjs <sign-in URL>
//
// Protocol: one line per message. The script answers on stdout with `REPLY <json>` (or
// `ERROR <message>`, then exits 1): first once the sign-in URL has been opened, then once per
// command read from stdin, one JSON object per line:
//   {"cmd": "expect_card", "id": ID}     wait until card ID appears (live, the page is not reloaded)
//   {"cmd": "screenshot", "path": PATH}  full-page PNG of the signed-in page
//   {"cmd": "decide", "approve": ID, "deny": ID, "reason": TEXT}
//                                        double-click Approve on one card, type TEXT and click Deny
//                                        on the other, wait until both are resolved for good
//   {"cmd": "withdraw", "id": ID}        click Withdraw on card ID, wait until it is resolved
//   {"cmd": "edit", "id": ID, "args": {…}} open "Edit arguments", type the JSON, Preview, report the
//                                        preview rows, then approve with them and wait until resolved
//   {"cmd": "cross_site", "url": URL}    a fresh context follows the sign-in URL from a link on
//                                        another site's page and reports what it shows
//   {"cmd": "anonymous", "id": ID}       a fresh context without the cookie opens the page and
//                                        tries to read and decide ID from it
//   {"cmd": "expect_resolved", "id": ID} wait until ID is resolved for good in the live list
//   {"cmd": "visit", "url": URL, "fresh": BOOL}
//                                        open URL in a fresh context, or in the signed-in page
//   {"cmd": "wait_disconnected"}         wait for the page's lost-connection notice
//   {"cmd": "try_approve", "id": ID}     click Approve on card ID and wait for the outcome shown
//   {"cmd": "quit"}
// Anything else on stdout is a bug: the test reads only REPLY/ERROR lines and prints the rest.

import { createInterface } from 'node:readline';
import { fail, launch, problemsOf, reply } from './driver.mjs';

const WAIT_MS = 15_000;
// States after which an approval's line in the resolved list no longer changes.
const FINAL_STATES = ['completed', 'failed', 'denied', 'cancelled', 'expired'];

// What a page shows, for the test to compare.
async function pageReport(page, problems, response) {
  return {
    status: response ? response.status() : null,
    url: page.url(),
    text: await page.innerText('body'),
    html: await page.content(),
    header_background: await page.$eval('header', (header) => getComputedStyle(header).backgroundColor),
    cards: await cardsOn(page),
    resolved: await resolvedOn(page),
    problems,
  };
}

// What a card shows: its action, whether it is focused, its argument rows.
async function cardsOn(page) {
  return page.$$eval('#cards .card', (cards) =>
    cards.map((card) => ({
      id: card.dataset.id,
      action: card.querySelector('h2')?.textContent ?? null,
      focused: card.classList.contains('focused'),
      args: Object.fromEntries(
        [...card.querySelectorAll('table.args tr')].map((row) => [
          row.querySelector('th')?.textContent ?? '',
          row.querySelector('td')?.textContent ?? '',
        ]),
      ),
      buttons: [...card.querySelectorAll('.decide button')].map((button) => button.textContent),
    })),
  );
}

async function resolvedOn(page) {
  return page.$$eval('#resolved li', (items) =>
    items.map((item) => ({
      id: item.id.replace(/^resolved-/, ''),
      status: item.dataset.status,
      text: item.textContent,
    })),
  );
}

async function main() {
  const loginUrl = process.argv[2];
  if (!loginUrl) throw new Error('usage: node approvals.mjs <sign-in URL>');
  const origin = new URL(loginUrl).origin;

  const browser = await launch();
  const context = await browser.newContext({ viewport: { width: 1000, height: 800 } });
  const page = await context.newPage();
  page.setDefaultTimeout(WAIT_MS);
  const problems = problemsOf(page);
  // Decisions the page sends, per approval id: a double click must send one.
  const decideRequests = {};
  page.on('request', (request) => {
    const match = new URL(request.url()).pathname.match(/^\/v1\/action-approvals\/([^/]+)\/decide$/);
    if (match) decideRequests[match[1]] = (decideRequests[match[1]] ?? 0) + 1;
  });
  let navigations = 0;
  page.on('framenavigated', (frame) => {
    if (frame === page.mainFrame()) navigations += 1;
  });

  const response = await page.goto(loginUrl);
  await page.waitForSelector('#cards');
  // Survives only as long as the document does: a reload would drop it.
  await page.evaluate(() => {
    window.aileronTestDocument = 'first';
  });
  const cookies = await context.cookies(origin);
  reply({
    status: response.status(),
    url: page.url(),
    cookies: cookies.map(({ name, httpOnly, sameSite, path }) => ({ name, httpOnly, sameSite, path })),
    document_cookie: await page.evaluate(() => document.cookie),
    cards: await cardsOn(page),
    problems,
  });

  // A card that has not moved in the last refresh (the page ignores decisions on one that has).
  async function settled(on, id) {
    await on.waitForSelector(`#card-${id}:not(.moved)`);
  }

  const commands = createInterface({ input: process.stdin });
  for await (const line of commands) {
    if (!line.trim()) continue;
    const command = JSON.parse(line);
    switch (command.cmd) {
      case 'expect_card': {
        const navigationsBefore = navigations;
        await page.waitForSelector(`#card-${command.id}`);
        reply({
          same_document: await page.evaluate(() => window.aileronTestDocument === 'first'),
          navigations: navigations - navigationsBefore,
          cards: await cardsOn(page),
          problems,
        });
        break;
      }
      case 'screenshot': {
        await page.screenshot({ path: command.path, fullPage: true });
        reply({ path: command.path });
        break;
      }
      case 'decide': {
        // Deny first, then approve: a resolved card leaves the list and the cards below move up,
        // so the second click of the double click (it checks that a decision is sent once) could
        // otherwise land on the card that still waits (seen on a loaded machine).
        await settled(page, command.deny);
        await page.fill(`#card-${command.deny} input.reason`, command.reason);
        await page.click(`#card-${command.deny} button.deny`);
        await page.waitForSelector(`#card-${command.deny}`, { state: 'detached' });
        // The card that moved up takes no decision until it has stood still for a moment.
        await settled(page, command.approve);
        await page.dblclick(`#card-${command.approve} button.approve`);
        await page.waitForFunction(
          ({ ids, finals }) =>
            ids.every((id) => finals.includes(document.getElementById(`resolved-${id}`)?.dataset.status)),
          { ids: [command.approve, command.deny], finals: FINAL_STATES },
        );
        reply({
          same_document: await page.evaluate(() => window.aileronTestDocument === 'first'),
          resolved: await resolvedOn(page),
          cards: await cardsOn(page),
          empty_notice_visible: await page.isVisible('#empty'),
          decide_requests: decideRequests,
          problems,
        });
        break;
      }
      case 'withdraw': {
        await page.click(`#card-${command.id} button.withdraw`);
        await page.waitForFunction(
          ({ id, finals }) => finals.includes(document.getElementById(`resolved-${id}`)?.dataset.status),
          { id: command.id, finals: FINAL_STATES },
        );
        reply({ resolved: await resolvedOn(page), cards: await cardsOn(page), problems });
        break;
      }
      case 'edit': {
        await settled(page, command.id);
        await page.click(`#card-${command.id} details.edit summary`);
        await page.fill(`#card-${command.id} textarea.edit-args`, JSON.stringify(command.args));
        const approveBefore = await page.isDisabled(`#card-${command.id} button.approve-edited`);
        await page.click(`#card-${command.id} button.preview-edit`);
        await page.waitForSelector(`#card-${command.id} .edit-preview table`);
        const rows = await page.$$eval(`#card-${command.id} .edit-preview tr`, (trs) =>
          trs.map((tr) => [tr.querySelector('th').textContent, tr.querySelector('td').textContent]));
        await page.click(`#card-${command.id} button.approve-edited`);
        await page.waitForFunction(
          ({ id, finals }) => finals.includes(document.getElementById(`resolved-${id}`)?.dataset.status),
          { id: command.id, finals: FINAL_STATES },
        );
        reply({ approve_disabled_before_preview: approveBefore, preview_rows: rows, resolved: await resolvedOn(page), problems });
        break;
      }
      case 'cross_site': {
        // The sign-in link followed from another site's page, as from a web chat or web mail.
        const elsewhere = await browser.newContext();
        const other = await elsewhere.newPage();
        other.setDefaultTimeout(WAIT_MS);
        const otherProblems = problemsOf(other);
        await other.route('http://elsewhere.test/', (route) =>
          route.fulfill({ contentType: 'text/html', body: `<a id="go" href="${command.url}">review</a>` }),
        );
        await other.goto('http://elsewhere.test/');
        await other.click('#go');
        await other.waitForSelector('#cards, #signed-out');
        reply({
          url: other.url(),
          signed_in: await other.isVisible('#cards'),
          signed_out: await other.isVisible('#signed-out'),
          cards: await cardsOn(other),
          problems: otherProblems,
        });
        await elsewhere.close();
        break;
      }
      case 'cookie_only': {
        // Another tab of the signed-in browser: it has the cookie (as any local service on
        // another port of 127.0.0.1 would) but not the sign-in tab's page secret.
        const tab = await context.newPage();
        tab.setDefaultTimeout(WAIT_MS);
        const tabProblems = problemsOf(tab);
        await tab.goto(`${origin}/approvals?focus=${command.id}`);
        await tab.waitForSelector(`#card-${command.id}`);
        const decided = tab.waitForResponse((r) => r.url().endsWith(`/v1/action-approvals/${command.id}/decide`));
        await tab.click(`#card-${command.id} .approve`);
        reply({
          read_only_notice: await tab.isVisible('#read-only'),
          decide_status: (await decided).status(),
          html_has_no_secret: !(await tab.content()).includes('sessionStorage.setItem'),
          problems: tabProblems.filter((p) => !p.includes('403')),
        });
        await tab.close();
        break;
      }
      case 'anonymous': {
        const stranger = await browser.newContext();
        const anonymous = await stranger.newPage();
        anonymous.setDefaultTimeout(WAIT_MS);
        const anonymousProblems = problemsOf(anonymous);
        const answer = await anonymous.goto(`${origin}/approvals?focus=${command.id}`);
        // Give a script (if the page had one) the time to open its event stream and render.
        await anonymous.waitForTimeout(500);
        const attempts = await anonymous.evaluate(async (id) => {
          const decide = (headers) =>
            fetch(`/v1/action-approvals/${id}/decide`, {
              method: 'POST',
              headers: { 'content-type': 'application/json', ...headers },
              body: JSON.stringify({ approved: true }),
            }).then((r) => r.status);
          return {
            decide_without_csrf: await decide({}),
            decide_with_a_guessed_csrf: await decide({ 'x-csrf-token': '0'.repeat(64) }),
            list: await fetch('/v1/action-approvals').then((r) => r.status),
            watch: await fetch('/v1/action-approvals/watch').then((r) => r.status),
            result: await fetch(`/v1/action-approvals/${id}/result`).then((r) => r.status),
          };
        }, command.id);
        reply({
          status: answer.status(),
          text: await anonymous.innerText('body'),
          html: await anonymous.content(),
          cards: await anonymous.locator('.card').count(),
          cookies: (await stranger.cookies(origin)).map(({ name }) => name),
          header_background: await anonymous.$eval('header', (header) => getComputedStyle(header).backgroundColor),
          problems: anonymousProblems,
          attempts,
        });
        await stranger.close();
        break;
      }
      case 'expect_resolved': {
        const navigationsBefore = navigations;
        await page.waitForFunction(
          ({ id, finals }) => finals.includes(document.getElementById(`resolved-${id}`)?.dataset.status),
          { id: command.id, finals: FINAL_STATES },
        );
        reply({ navigations: navigations - navigationsBefore, resolved: await resolvedOn(page), problems });
        break;
      }
      case 'visit': {
        if (command.fresh) {
          const stranger = await browser.newContext();
          const visitor = await stranger.newPage();
          visitor.setDefaultTimeout(WAIT_MS);
          const visitorProblems = problemsOf(visitor);
          const answer = await visitor.goto(command.url);
          reply(await pageReport(visitor, visitorProblems, answer));
          await stranger.close();
        } else {
          problems.length = 0;
          const answer = await page.goto(command.url);
          await page.waitForSelector('#cards');
          reply(await pageReport(page, problems, answer));
        }
        break;
      }
      case 'wait_disconnected': {
        await page.waitForSelector('#connection', { state: 'visible' });
        reply({ text: await page.innerText('#connection') });
        break;
      }
      case 'click_top_once_moved': {
        // A click aimed at the top card as another takes its place (the card above it gone).
        await page.waitForFunction(
          (gone) => { const top = document.querySelector('#cards .card[data-id]'); return top && top.dataset.id !== gone; },
          command.gone,
        );
        const top = await page.$eval('#cards .card[data-id]', (card) => card.dataset.id);
        const before = decideRequests[top] ?? 0;
        await page.click(`#card-${top} button.approve`);
        await page.waitForTimeout(200);
        reply({
          top,
          status: await page.innerText(`#card-${top} .status`),
          decide_requests_sent: (decideRequests[top] ?? 0) - before,
        });
        break;
      }
      case 'click_after_shift': {
        // Scrolled to the end of a short window, a card below the target leaves: the page gets
        // shorter and the target moves on the screen without changing its place in the list.
        await page.setViewportSize({ width: 1000, height: 300 });
        await page.evaluate(() => window.scrollTo(0, document.documentElement.scrollHeight));
        await page.waitForTimeout(100);
        const topBefore = await page.$eval(`#card-${command.target}`, (card) => card.getBoundingClientRect().top);
        await page.waitForSelector(`#card-${command.gone}`, { state: 'detached' });
        const topAfter = await page.$eval(`#card-${command.target}`, (card) => card.getBoundingClientRect().top);
        const before = decideRequests[command.target] ?? 0;
        await page.click(`#card-${command.target} button.approve`);
        await page.waitForTimeout(200);
        const status = await page.innerText(`#card-${command.target} .status`);
        await page.setViewportSize({ width: 1280, height: 720 });
        reply({ moved_by: topAfter - topBefore, status, decide_requests_sent: (decideRequests[command.target] ?? 0) - before });
        break;
      }
      case 'try_approve': {
        const card = `#card-${command.id}`;
        await settled(page, command.id);
        await page.click(`${card} button.approve`);
        await page.waitForFunction(
          (selector) => !['', 'sending…'].includes(document.querySelector(selector)?.textContent ?? ''),
          `${card} .status`,
        );
        reply({
          status: await page.innerText(`${card} .status`),
          buttons_disabled: await page.$$eval(`${card} .decide button`, (buttons) => buttons.map((b) => b.disabled)),
          still_shown: await page.isVisible(card),
        });
        break;
      }
      case 'quit': {
        await browser.close();
        reply({ closed: true });
        process.exit(0);
      }
      default:
        throw new Error(`unknown command ${line}`);
    }
  }
  // stdin closed without `quit`: the test is gone, so is the browser.
  await browser.close();
}

main().catch(fail);
