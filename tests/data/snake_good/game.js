// Snake on a 20 x 20 grid: arrow keys steer, food makes the snake one cell longer.
const canvas = document.getElementById('game');
const ctx = canvas.getContext('2d');
const scoreEl = document.getElementById('score');
const CELL = 20;
const COLS = canvas.width / CELL;
const ROWS = canvas.height / CELL;
const DIRS = {
  ArrowUp: { x: 0, y: -1 },
  ArrowDown: { x: 0, y: 1 },
  ArrowLeft: { x: -1, y: 0 },
  ArrowRight: { x: 1, y: 0 },
};

let snake, dir, next, food, score, over;

function reset() {
  snake = [{ x: 10, y: 10 }, { x: 9, y: 10 }, { x: 8, y: 10 }];
  dir = DIRS.ArrowRight;
  next = dir;
  score = 0;
  over = false;
  scoreEl.textContent = score;
  placeFood();
}

function placeFood() {
  do {
    food = { x: Math.floor(Math.random() * COLS), y: Math.floor(Math.random() * ROWS) };
  } while (snake.some(s => s.x === food.x && s.y === food.y));
}

document.addEventListener('keydown', e => {
  if (e.key === ' ' && over) {
    reset();
    return;
  }
  const d = DIRS[e.key];
  if (!d) return;
  e.preventDefault();
  if (d.x !== -dir.x || d.y !== -dir.y) next = d;  // no turning back into itself
});

function step() {
  if (over) return;
  dir = next;
  const head = { x: snake[0].x + dir.x, y: snake[0].y + dir.y };
  const hitWall = head.x < 0 || head.y < 0 || head.x >= COLS || head.y >= ROWS;
  if (hitWall || snake.some(s => s.x === head.x && s.y === head.y)) {
    over = true;
    return;
  }
  snake.unshift(head);
  if (head.x === food.x && head.y === food.y) {
    score += 1;
    scoreEl.textContent = score;
    placeFood();
  } else {
    snake.pop();
  }
}

function draw() {
  ctx.fillStyle = '#000';
  ctx.fillRect(0, 0, canvas.width, canvas.height);
  ctx.fillStyle = '#e53935';
  ctx.fillRect(food.x * CELL, food.y * CELL, CELL, CELL);
  ctx.fillStyle = '#4caf50';
  snake.forEach(s => ctx.fillRect(s.x * CELL + 1, s.y * CELL + 1, CELL - 2, CELL - 2));
  if (over) {
    ctx.fillStyle = '#fff';
    ctx.font = '28px sans-serif';
    ctx.textAlign = 'center';
    ctx.fillText('游戏结束', canvas.width / 2, canvas.height / 2);
  }
}

reset();
draw();
setInterval(() => { step(); draw(); }, 120);
