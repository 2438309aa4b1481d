// @waits 25: a frozen server waiting out the cell timeout and the bounded reads (see freeze.cases.ts).
import { freezeCases } from './freeze.cases';

freezeCases('mariadb');
