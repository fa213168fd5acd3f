// Drives the daemon's web console (/activity, /actions, /connectors, /accounts, /agents,
// /approvals) in Debian's chromium for crates/aileron/tests/it/browser/console.rs.
//
// Like approvals.mjs, the Rust test owns the scenario and every assertion; this script only acts
// in the browser and reports what it saw. It knows no page: commands name CSS selectors.
// Usage: node console.mjs <sign-in URL>
//
// Protocol: one line per message. The script answers on stdout with `REPLY <json>` (or
// `ERROR <message>`, then exits 1): first once the sign-in URL has been opened and the page it
// lands on has loaded (a report, below), then once per command read from stdin, one JSON object
// per line. Commands that look at the page take `count` (selectors: how many match, in
// `counts`), `texts` (selectors: the innerText of each match, in `texts`) and `visible`
// (selectors: whether the first match is visible, in `visible`), and answer with a report:
//   {url, text, html, problems, header_background, navigations, same_document, counts, texts,
//    visible}
// where, since the previous reply, `problems` are the console errors and warnings and page
// errors, `navigations` counts the documents loaded (a `goto`'s own not counted) and
// `same_document` says whether the document is still the same one (no reload, no navigation).
//   {"cmd": "goto", "path": P, "wait": SEL?}  open P (a path on the daemon) in the signed-in page;
//                                        wait for SEL too when given; adds `status` (HTTP)
//   {"cmd": "fill", "selector": S, "value": V}
//   {"cmd": "click", "selector": S}      click S, accepting any confirm(); when S is a control button
//                                        (`data-path`), wait until its group's `.status` shows an
//                                        outcome, or the page navigates; adds `status` (the outcome,
//                                        or null after a navigation) and `dialogs` (confirm texts)
//   {"cmd": "wait_text", "selector": S, "text": T, "absent": BOOL?}
//                                        wait, without navigating, until S's innerText contains T
//                                        (or, with `absent`, no longer does)
//   {"cmd": "wait_count", "selector": S, "at_least": N}   wait until S matches at least N elements
//   {"cmd": "wait_gone", "selector": S}  wait until nothing matches S
//   {"cmd": "wait_url", "text": T}       wait until the page's URL contains T (and it has loaded)
//   {"cmd": "look"}                      a report of the page as it is now
//   {"cmd": "screenshot", "path": PATH}  full-page PNG of the signed-in page
//   {"cmd": "cookie"}                    {value, csrf}: the session cookie and the tab's page
//                                        secret, for requests the test forges itself
//   {"cmd": "fresh", "url": URL}         open URL in a fresh context (no cookie): a report plus
//                                        `buttons` (how many `button` elements it has)
//   {"cmd": "quit"}
// Anything else on stdout is a bug: the test reads only REPLY/ERROR lines and prints the rest.

import { createInterface } from 'node:readline';
import { fail, launch, problemsOf, reply } from './driver.mjs';

const WAIT_MS = 15_000;
const POLL_MS = 50;
// A control's `.status` while its request is in flight (console.js); anything else is an outcome.
const IN_FLIGHT = ['', 'sending…', 'opening the provider…'];
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// The asked-for selectors' match counts, texts and visibility.
async function selectorsOn(page, command) {
  const counts = {};
  for (const selector of command.count ?? []) counts[selector] = await page.locator(selector).count();
  const texts = {};
  for (const selector of command.texts ?? []) texts[selector] = await page.locator(selector).allInnerTexts();
  const visible = {};
  for (const selector of command.visible ?? []) visible[selector] = await page.locator(selector).first().isVisible();
  return { counts, texts, visible };
}

async function headerBackground(page) {
  const header = await page.$('header');
  return header ? header.evaluate((h) => getComputedStyle(h).backgroundColor) : null;
}

async function main() {
  const loginUrl = process.argv[2];
  if (!loginUrl) throw new Error('usage: node console.mjs <sign-in URL>');
  const origin = new URL(loginUrl).origin;

  const browser = await launch();
  const context = await browser.newContext({ viewport: { width: 1200, height: 800 } });
  const page = await context.newPage();
  page.setDefaultTimeout(WAIT_MS);
  const problems = problemsOf(page);
  const dialogs = [];
  page.on('dialog', (dialog) => {
    dialogs.push(dialog.message());
    dialog.accept();
  });
  // New documents only: `framenavigated` also fires for `history.replaceState`, which the
  // activity page's filters use without leaving the document.
  let navigations = 0;
  page.on('domcontentloaded', () => {
    navigations += 1;
  });

  // Marks the document: a reload or a navigation drops the mark.
  const mark = () => page.evaluate(() => { window.aileronTestDocument = 'marked'; });

  async function report(command, extra = {}) {
    const value = {
      url: page.url(),
      text: await page.innerText('body'),
      html: await page.content(),
      problems: problems.splice(0),
      header_background: await headerBackground(page),
      navigations,
      same_document: await page.evaluate(() => window.aileronTestDocument === 'marked'),
      ...(await selectorsOn(page, command)),
      ...extra,
    };
    navigations = 0;
    await mark();
    return value;
  }

  // Until `outcome()` gives a value or the page has navigated since `navigationsBefore` was
  // counted: `{outcome}` or `{navigated: true}`. `what()` says what was awaited, for the error.
  async function untilOrNavigation(navigationsBefore, outcome, what) {
    const deadline = Date.now() + WAIT_MS;
    for (;;) {
      if (navigations > navigationsBefore) {
        await page.waitForLoadState('load');
        return { navigated: true };
      }
      // Evaluating while the page navigates throws: the next round sees the navigation.
      const value = await outcome().catch(() => null);
      if (value !== null && value !== undefined) return { outcome: value };
      if (Date.now() > deadline) throw new Error(`waited ${WAIT_MS} ms for ${await what()} at ${page.url()}`);
      await sleep(POLL_MS);
    }
  }

  const response = await page.goto(loginUrl);
  // The sign-in page navigates itself on to the console page.
  await page.waitForSelector('#content, #signed-out, #expired');
  await page.waitForLoadState('load');
  await mark();
  navigations = 0;
  reply(await report({ count: ['nav a', 'nav a[aria-current=page]'] }, { status: response ? response.status() : null }));

  const commands = createInterface({ input: process.stdin });
  for await (const line of commands) {
    if (!line.trim()) continue;
    const command = JSON.parse(line);
    switch (command.cmd) {
      case 'goto': {
        const answer = await page.goto(`${origin}${command.path}`);
        await page.waitForSelector('#content, #signed-out');
        if (command.wait) await page.waitForSelector(command.wait);
        await mark();
        navigations = 0;
        reply(await report(command, { status: answer ? answer.status() : null }));
        break;
      }
      case 'fill': {
        await page.fill(command.selector, command.value);
        reply(await report(command));
        break;
      }
      case 'click': {
        const dialogsBefore = dialogs.length;
        // A live refresh may replace the button's group at any time, before the click or while
        // its request is in flight: the outcome is looked for both in the group's `.status` held
        // by reference (the script writes into the one it started with, even when detached) and
        // in any `.status` the page changes meanwhile.
        const control = await page.$eval(command.selector, (element) => {
          if (!element.matches('button[data-path]')) return false;
          window.aileronTestStatus = (element.closest('.group') || element.parentElement).querySelector('.status');
          window.aileronTestOutcomes = [];
          window.aileronTestObserver?.disconnect();
          window.aileronTestObserver = new MutationObserver((changes) => {
            for (const change of changes) {
              const target = change.target.nodeType === Node.ELEMENT_NODE ? change.target : change.target.parentElement;
              if (target?.classList.contains('status')) window.aileronTestOutcomes.push(target.textContent);
            }
          });
          window.aileronTestObserver.observe(document.body, { subtree: true, childList: true, characterData: true });
          return true;
        });
        // Counted before the click: `click` itself may wait until a navigation it started is done.
        const navigationsBefore = navigations;
        // An approval card that has just moved takes no decision until it has stood still.
        await page.waitForFunction((selector) => !document.querySelector(selector)?.closest('.card.moved'), command.selector);
        await page.click(command.selector);
        let status = null;
        if (control) {
          const outcome = () =>
            page.evaluate((inFlight) => {
              const held = window.aileronTestStatus?.textContent ?? '';
              if (!inFlight.includes(held)) return held;
              return (window.aileronTestOutcomes ?? []).find((text) => !inFlight.includes(text)) ?? null;
            }, IN_FLIGHT);
          const seen = await untilOrNavigation(
            navigationsBefore,
            outcome,
            async () => `the outcome of ${command.selector} (seen: ${JSON.stringify(await page.evaluate(() => window.aileronTestOutcomes))})`,
          );
          status = seen.navigated ? null : seen.outcome;
          await page.evaluate(() => window.aileronTestObserver?.disconnect()).catch(() => {});
        }
        reply(await report(command, { status, dialogs: dialogs.slice(dialogsBefore) }));
        break;
      }
      case 'wait_text': {
        await page.waitForFunction(
          ({ selector, text, absent }) => {
            const element = document.querySelector(selector);
            const shown = element ? element.innerText : '';
            return absent ? !shown.includes(text) : shown.includes(text);
          },
          { selector: command.selector, text: command.text, absent: Boolean(command.absent) },
          { polling: POLL_MS },
        );
        reply(await report(command));
        break;
      }
      case 'wait_count': {
        await page.waitForFunction(
          ({ selector, atLeast }) => document.querySelectorAll(selector).length >= atLeast,
          { selector: command.selector, atLeast: command.at_least },
          { polling: POLL_MS },
        );
        reply(await report(command));
        break;
      }
      case 'wait_gone': {
        await page.waitForSelector(command.selector, { state: 'detached' });
        reply(await report(command));
        break;
      }
      case 'wait_url': {
        await page.waitForURL((url) => url.href.includes(command.text));
        await page.waitForLoadState('load');
        reply(await report(command));
        break;
      }
      case 'look': {
        reply(await report(command));
        break;
      }
      case 'screenshot': {
        await page.screenshot({ path: command.path, fullPage: true });
        reply({ path: command.path });
        break;
      }
      case 'cookie': {
        const cookie = (await context.cookies(origin)).find(({ name }) => name === 'aileron_web');
        reply({
          value: cookie ? cookie.value : null,
          csrf: await page.evaluate(() => sessionStorage.getItem('aileron-page-secret')),
        });
        break;
      }
      case 'fresh': {
        const stranger = await browser.newContext();
        const visitor = await stranger.newPage();
        visitor.setDefaultTimeout(WAIT_MS);
        const visitorProblems = problemsOf(visitor);
        const answer = await visitor.goto(command.url);
        // Give a script (if the page had one) the time to open its event stream and render.
        await visitor.waitForTimeout(300);
        reply({
          url: visitor.url(),
          status: answer ? answer.status() : null,
          text: await visitor.innerText('body'),
          html: await visitor.content(),
          buttons: await visitor.locator('button').count(),
          header_background: await headerBackground(visitor),
          cookies: (await stranger.cookies(origin)).map(({ name }) => name),
          problems: visitorProblems,
        });
        await stranger.close();
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
